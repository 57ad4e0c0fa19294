# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_placement_info against its baseline, the fleet facts, from the same lists; and the what-if.

A stand-in API server (a child process on 127.0.0.1, plain HTTP) serves the nodes and pods of
`fleet_scale.py`'s fleet (GPU nodes of six models, 20 pods per node by default, about half holding
a GPU) page by page as the API server does (`limit`/`continue`), and empty DRA lists. No cluster is
needed, so the target scale (5,000 nodes, 100,000 pods) fits a small machine. The pages are encoded
once, when the server starts; what is timed is the client's side: the reads, the JSON decoding,
the projection, the verdicts and the result made JSON, in a fresh process each run:

- facts: `read_fleet` + `summarise` + JSON, what gpu_node_facts does (as `facts_direct.py`);
- placement: `read_nodes_and_pods` + `read_dra` + the view + pending pods + JSON, what gpu_placement_info does.

Then the what-if: `scripts/gpu-placement` end to end (start-up, reads, parsing the manifests, verdicts)
for --manifests Deployments of 1 to 8 GPUs, half with a model selector, each of its own CPU and memory
(so that no two pod shapes are the same), against a --whatif-nodes fleet.

    python -m bench.bench_placement --nodes 200 --pods 4000 --repeat 3 --manifests 100 --whatif-nodes 100
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

ROOT = Path(__file__).resolve().parents[1]
LISTS = {"/api/v1/nodes": "NodeList", "/api/v1/pods": "PodList"}
DRA_PREFIX = "/apis/resource.k8s.io/v1/"


# --- the stand-in API server ---------------------------------------------------------------------


def fleet_items(nodes: int, pods: int) -> dict[str, list[bytes]]:
    from bench import fleet_scale

    running = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    node_items = []
    for index in range(nodes):
        node = fleet_scale.node_object(index)
        node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        node_items.append(json.dumps(node).encode())
    pod_items = [json.dumps({**p, "status": running}).encode() for p in fleet_scale.wanted_pods(nodes, pods)]
    return {"/api/v1/nodes": node_items, "/api/v1/pods": pod_items}


def handler_for(items: dict[str, list[bytes]]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
            url = urlparse(self.path)
            query = parse_qs(url.query)
            found = items.get(url.path, [] if url.path.startswith(DRA_PREFIX) else None)
            if found is None:
                self.reply(404, b'{"kind":"Status","code":404}')
                return
            start = int(query.get("continue", ["0"])[0] or 0)
            limit = int(query.get("limit", ["500"])[0])
            end = min(start + limit, len(found))
            token = str(end) if end < len(found) else ""
            kind = LISTS.get(url.path, "List")
            head = f'{{"kind":"{kind}","apiVersion":"v1","metadata":{{"resourceVersion":"1","continue":"{token}"}},"items":['
            self.reply(200, head.encode() + b",".join(found[start:end]) + b"]}")

        def reply(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


def serve(nodes: int, pods: int) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(fleet_items(nodes, pods)))
    print(server.server_address[1], flush=True)
    server.serve_forever()


class FakeApi:
    """The stand-in server in a child process, and a kubeconfig that points at it."""

    def __init__(self, nodes: int, pods: int, folder: Path):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.bench_placement", "serve", "--nodes", str(nodes), "--pods", str(pods)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        port = int(self.process.stdout.readline())
        self.kubeconfig = folder / f"kubeconfig-{port}"
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
            "users": [{"name": "anonymous", "user": {}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "anonymous"}}],
            "current-context": "fake",
        }
        self.kubeconfig.write_text(json.dumps(config))

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


# --- what is measured, each in a fresh process -----------------------------------------------------


def measure_facts(kubeconfig: str) -> dict[str, Any]:
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.facts import summarise
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.reads import read_fleet
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import options_from_params
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import client_from_params

    client = client_from_params({"kubeconfig": kubeconfig})
    options = options_from_params()
    nodes, pods, plugins, dra = read_fleet(client, options, None, None, 500)
    result = summarise(nodes, pods, plugins, options, dra)
    return {"bytes": len(json.dumps({"gpu_fleet": result})), "requests": client.request_count, "nodes": len(nodes)}


def measure_placement(kubeconfig: str) -> dict[str, Any]:
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra_reads import read_dra
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import gpu_resource_matcher
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import client_from_params
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.fleet import fleet_of
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.options import placement_options
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.reads import read_nodes_and_pods
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.summary import (
        placement_summary,
    )

    client = client_from_params({"kubeconfig": kubeconfig})
    options = placement_options()
    is_gpu = gpu_resource_matcher()
    nodes, usage, pending = read_nodes_and_pods(client, is_gpu, 500)
    dra = read_dra(client, 500)
    result = placement_summary(fleet_of(nodes, usage, dra, options), pending, options, is_gpu, dra)
    del result["nodes"]
    return {"bytes": len(json.dumps({"placement": result})), "requests": client.request_count, "nodes": len(nodes)}


def measure(which: str, kubeconfig: str) -> None:
    started = time.perf_counter()
    summary = (measure_facts if which == "facts" else measure_placement)(kubeconfig)
    summary["seconds"] = round(time.perf_counter() - started, 3)
    summary["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(summary))


def run_measure(which: str, kubeconfig: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "bench.bench_placement", "measure", which, "--kubeconfig", str(kubeconfig)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- the what-if corpus ------------------------------------------------------------------------------


def deployments(count: int) -> str:
    from bench import fleet_scale

    models = sorted({m.labels.get("nvidia.com/gpu.product") for m in fleet_scale._SLOTS} - {None})  # noqa: SLF001
    docs = []
    for index in range(count):
        gpus = (1, 2, 4, 8)[index % 4]
        selector = (
            f"      nodeSelector: {{nvidia.com/gpu.product: {models[index % len(models)]}}}\n" if index % 2 else ""
        )
        docs.append(
            f"apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: train-{index:04d}, namespace: team-{index % 20:02d}}}\n"
            f"spec:\n  replicas: {1 + index % 3}\n  selector: {{matchLabels: {{app: train-{index:04d}}}}}\n"
            f"  template:\n    metadata: {{labels: {{app: train-{index:04d}}}}}\n    spec:\n{selector}"
            "      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]\n"
            "      containers:\n        - name: main\n          image: nvcr.io/nvidia/pytorch:24.05-py3\n"
            f"          resources: {{limits: {{nvidia.com/gpu: {gpus}}}, requests: {{cpu: '{1 + index % 16}', memory: {8000 + index}Mi}}}}\n"
        )
    return "---\n".join(docs)


def time_what_if(kubeconfig: Path, manifests: Path) -> dict[str, Any]:
    started = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "gpu-placement"),
            "--kubeconfig",
            str(kubeconfig),
            "--json",
            str(manifests.with_suffix(".json")),
            str(manifests),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - started
    assert done.returncode in (0, 1), done.stderr
    result = json.loads(manifests.with_suffix(".json").read_text())
    return {
        "seconds": round(seconds, 3),
        "templates": len(result["what_if"]),
        "fit": sum(e["fits"] for e in result["what_if"]),
    }


# --- the run -----------------------------------------------------------------------------------------


def compare(nodes: int, pods: int, repeat: int, folder: Path) -> dict[str, Any]:
    api = FakeApi(nodes, pods, folder)
    try:
        runs: dict[str, list[dict[str, Any]]] = {"facts": [], "placement": []}
        for _round in range(repeat):
            for which in runs:  # alternating, so that a busy moment of a shared machine hits both
                runs[which].append(run_measure(which, api.kubeconfig))
    finally:
        api.stop()
    return {
        which: {
            "seconds": statistics.median(r["seconds"] for r in results),
            "peak_rss_mb": max(r["peak_rss_mb"] for r in results),
            "requests": results[0]["requests"],
            "result_bytes": results[0]["bytes"],
        }
        for which, results in runs.items()
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    serve_parser = sub.add_parser("serve")
    serve_parser.add_argument("--nodes", type=int, required=True)
    serve_parser.add_argument("--pods", type=int, required=True)
    measure_parser = sub.add_parser("measure")
    measure_parser.add_argument("which", choices=("facts", "placement"))
    measure_parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--pods", type=int, default=4000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--manifests", type=int, default=100)
    parser.add_argument("--whatif-nodes", type=int, default=100)
    parser.add_argument("--json", dest="json_file", help="write the numbers here too")
    args = parser.parse_args()
    if args.command == "serve":
        serve(args.nodes, args.pods)
        return 0
    if args.command == "measure":
        measure(args.which, args.kubeconfig)
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        numbers = compare(args.nodes, args.pods, args.repeat, folder)
        facts, placement = numbers["facts"], numbers["placement"]
        print(f"fleet of {args.nodes} nodes, {args.pods} pods; median of {args.repeat} runs, each in a fresh process")
        print(f"{'':<12}{'seconds':>9}{'peak RSS MB':>13}{'requests':>10}{'result KB':>11}")
        for name, row in (("facts", facts), ("placement", placement)):
            print(
                f"{name:<12}{row['seconds']:>9.3f}{row['peak_rss_mb']:>13.1f}{row['requests']:>10}"
                f"{row['result_bytes'] / 1024:>11.1f}"
            )
        print(
            f"placement / facts: {placement['seconds'] / facts['seconds']:.2f}x time (target at most 1.15x), "
            f"{placement['peak_rss_mb']:.0f} MB peak (target under 200 MB)"
        )
        api = FakeApi(args.whatif_nodes, args.whatif_nodes * 20, folder)
        try:
            corpus = folder / "deployments.yaml"
            corpus.write_text(deployments(args.manifests))
            numbers["what_if"] = time_what_if(api.kubeconfig, corpus)
        finally:
            api.stop()
        what_if = numbers["what_if"]
        print(
            f"what-if: {what_if['templates']} Deployments against {args.whatif_nodes} nodes in "
            f"{what_if['seconds']:.2f} s end to end ({what_if['fit']} fit; target under 5 s for 1,000 x 1,000)"
        )
        if args.json_file:
            Path(args.json_file).write_text(json.dumps({"args": vars(args), **numbers}, indent=1))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
