# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Time gpu_node_facts and gpu_node_label beside kubectl, on one running cluster, in one run.

Facts (repetitions alternate, the order rotating each round):
  - the transfer floor: the pages the module reads (same lists, page size and selectors) over
    HTTPS, not decoded (bench/facts_floors.py --mode transfer);
  - the decode floor: the same pages, each decoded with json.loads and dropped (--mode decode);
  - gpu_node_facts through ansible-playbook (bench/playbooks/facts.yml);
  - gpu_node_facts through its module_utils in a subprocess (bench/facts_direct.py: the
    module's read_fleet and summarise), whose peak RSS is the module's memory;
  - a peer: `kubectl get nodes -o json` then `kubectl get pods -A -o json`, output discarded;
  - ansible-playbook running an empty play: Ansible's fixed cost.
  With --peer-repeat N (N > 0) and kubernetes.core at hand (bench/peers.py), the other peer after
  those rounds, N times: kubernetes.core.k8s_info for nodes and pods plus Jinja to add up GPUs
  (bench/playbooks/facts_k8s_info.yml), what an Ansible user writes today.
Labels (with --labels; per round the two pairs alternate which goes first):
  - gpu_node_label through ansible-playbook (bench/playbooks/label.yml), cold (the accelerator
    label and the ownership annotation stripped from every node first, untimed) then warm;
  - `kubectl label nodes -l <model label>=<model> accelerator=<value> --overwrite`, one command
    per model, cold (stripped first) then warm.
  Writes are counted twice: by the module (`writes`) and on the API server (the delta of
  apiserver_request_total for PATCH on nodes, no subresource), which counts kubectl's too, and
  printed beside the nodes each run changed.
  With --peer-repeat N (N > 0) and kubernetes.core at hand, the labels peer after those rounds, cold,
  N times: a kubernetes.core.k8s `state: patched` loop over the nodes (bench/playbooks/label_k8s_patched.yml;
  --label-peer-nodes limits it to the first nodes, as it takes about 0.4 s a node).

    python -m bench.bench_facts_labels --kubeconfig PATH [--repeat 5] [--peer-repeat 1] [--labels] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.labels.plan import (
    DEFAULT_LABEL_KEY,
    OWNERSHIP_ANNOTATION,
    label_value_for,
)
from bench import fleet_scale, peers
from bench.bench_module_start import extract
from bench.timing import Contender, alternate, run_once
from tests.cluster import versions
from tests.collection import collections_root

HERE = Path(__file__).resolve().parent

NODES = "/api/v1/nodes"
_PATCH_NODES = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\}\s+(?P<value>[0-9.e+]+)$")


def tools() -> dict[str, str]:
    bin_dir = Path(sys.executable).parent
    return {
        "python": sys.executable,
        "ansible_playbook": str(bin_dir / "ansible-playbook")
        if (bin_dir / "ansible-playbook").exists()
        else shutil.which("ansible-playbook") or "ansible-playbook",
        "kubectl": str(versions.bin_dir() / "kubectl"),
    }


def playbook_command(t: dict[str, str], kubeconfig: str, playbook: str) -> list[str]:
    return [
        t["ansible_playbook"],
        "-i",
        "localhost,",
        "-e",
        f"kubeconfig={kubeconfig}",
        "-e",
        f"ansible_python_interpreter={t['python']}",
        str(HERE / "playbooks" / playbook),
    ]


def ansible_env() -> dict[str, str]:
    return {
        "ANSIBLE_COLLECTIONS_PATH": str(collections_root()),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_RETRY_FILES_ENABLED": "0",
        "ANSIBLE_LOCALHOST_WARNING": "0",
    }


def check_ok(contender: Contender, _output: str) -> None:
    if contender.codes[-1] != 0:
        raise RuntimeError(f"{contender.name} failed (exit {contender.codes[-1]})")


# --- facts ----------------------------------------------------------------------------------


TRANSFER_FLOOR = "transfer floor: the module's pages over HTTPS, not decoded"
DECODE_FLOOR = "decode floor: the module's pages, json.loads each, nothing kept"
KUBECTL_PEER = "kubectl get nodes + get pods -A, -o json (peer)"
K8S_INFO_PEER = "kubernetes.core.k8s_info nodes + pods, Jinja sums (peer)"


def last_json_line(output: str) -> dict[str, Any]:
    return dict(json.loads(output.strip().splitlines()[-1]))


ALL_DRA_DEVICES = "gpu_node_facts via ansible-playbook, dra_devices=all (every DRA device listed)"
BASELINE_PREFIX = "gpu_node_facts via ansible-playbook, before: "


def baseline_contender(kubeconfig: str, ref: str, collection: Path) -> Contender:
    """The same playbook run with the collection of another commit (taken out at `collection`), as it was."""
    env = ansible_env()
    env["ANSIBLE_COLLECTIONS_PATH"] = str(collection.parents[2])
    env["ANSIBLE_COLLECTIONS_SCAN_SYS_PATH"] = "false"
    command = playbook_command(tools(), kubeconfig, "facts.yml")
    return Contender(f"{BASELINE_PREFIX}{ref}", [command], env=env, after=check_ok)


def facts_contenders(
    kubeconfig: str, with_empty: bool = True, with_kubectl: bool = True, all_dra_devices: bool = False
) -> list[Contender]:
    t = tools()
    kubectl = [t["kubectl"], "--kubeconfig", kubeconfig]

    def json_after(contender: Contender, output: str) -> None:
        check_ok(contender, output)
        contender.notes.setdefault("runs", []).append(last_json_line(output))

    def floor(mode: str, name: str) -> Contender:
        command = [t["python"], "-m", "bench.facts_floors", "--kubeconfig", kubeconfig, "--mode", mode]
        return Contender(name, [command], capture=True, after=json_after)

    chosen = [
        floor("transfer", TRANSFER_FLOOR),
        floor("decode", DECODE_FLOOR),
        Contender(
            "gpu_node_facts via ansible-playbook",
            [playbook_command(t, kubeconfig, "facts.yml")],
            env=ansible_env(),
            after=check_ok,
        ),
        Contender(
            "gpu_node_facts via module_utils",
            [[t["python"], "-m", "bench.facts_direct", "--kubeconfig", kubeconfig]],
            capture=True,
            after=json_after,
        ),
    ]
    if all_dra_devices:
        chosen.append(
            Contender(
                ALL_DRA_DEVICES,
                [
                    playbook_command(t, kubeconfig, "facts.yml")[:-1]
                    + ["-e", "dra_devices=all", str(HERE / "playbooks" / "facts.yml")]
                ],
                env=ansible_env(),
                after=check_ok,
            )
        )
    if with_kubectl:
        chosen.append(
            Contender(
                KUBECTL_PEER,
                [kubectl + ["get", "nodes", "-o", "json"], kubectl + ["get", "pods", "-A", "-o", "json"]],
                after=check_ok,
            )
        )
    if with_empty:
        chosen.append(
            Contender(
                "ansible-playbook, empty play (fixed cost)",
                [playbook_command(t, kubeconfig, "empty.yml")],
                env=ansible_env(),
                after=check_ok,
            )
        )
    return chosen


def k8s_info_contender(kubeconfig: str, collections: Path) -> Contender:
    """kubernetes.core.k8s_info + Jinja, with kubernetes.core from its own collections folder."""
    t = tools()

    def after(contender: Contender, output: str) -> None:
        check_ok(contender, output)
        match = re.search(r'"msg": "BENCH (\{.*\})"', output)
        if not match:
            raise RuntimeError(f"{contender.name}: no BENCH line in the playbook output")
        contender.notes.setdefault("runs", []).append(json.loads(match.group(1).replace('\\"', '"')))

    env = ansible_env()
    env["ANSIBLE_COLLECTIONS_PATH"] = f"{env['ANSIBLE_COLLECTIONS_PATH']}:{collections}"
    return Contender(
        K8S_INFO_PEER, [playbook_command(t, kubeconfig, "facts_k8s_info.yml")], env=env, capture=True, after=after
    )


def list_sizes(kubeconfig: str) -> dict[str, int]:
    """Bytes of `kubectl get ... -o json` (what the floor reads and prints), and object counts."""
    t = tools()
    sizes = {}
    for what, args in (("nodes", ["get", "nodes", "-o", "json"]), ("pods", ["get", "pods", "-A", "-o", "json"])):
        out = subprocess.run([t["kubectl"], "--kubeconfig", kubeconfig, *args], check=True, capture_output=True).stdout
        sizes[f"{what}_json_bytes"] = len(out)
        sizes[f"{what}_count"] = len(json.loads(out)["items"])
    return sizes


def profile(module: str, kubeconfig: str, out: Path, top: int = 25) -> str:
    """cProfile of a module_utils run; the top functions by internal and by cumulative time."""
    import pstats
    from io import StringIO

    subprocess.run(
        [sys.executable, "-m", module, "--kubeconfig", kubeconfig, "--profile", str(out)],
        check=True,
        capture_output=True,
    )
    text = StringIO()
    stats = pstats.Stats(str(out), stream=text)
    stats.strip_dirs().sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return text.getvalue()


def bench_facts(
    kubeconfig: str,
    repeat: int,
    log: Callable[[str], None],
    with_empty: bool = True,
    peer_repeat: int = 0,
    baseline: tuple[str, Path] | None = None,
    **chosen: bool,
) -> dict[str, Any]:
    """The facts contenders alternated `repeat` times; with_kubectl=False leaves out kubectl, as a peer and
    for the sizes of its JSON (at 100,000 pods it prints about a gigabyte and needs over 10 GB);
    all_dra_devices=True adds the facts listing every DRA device beside the default's; baseline (a git ref
    and its collection taken out) adds the playbook with that commit's collection."""
    with_kubectl = chosen.get("with_kubectl", True)
    contenders = facts_contenders(kubeconfig, with_empty, with_kubectl, chosen.get("all_dra_devices", False))
    if baseline:
        contenders.append(baseline_contender(kubeconfig, *baseline))
    direct = next(c for c in contenders if c.name == "gpu_node_facts via module_utils")
    run_once(direct)  # warm-up: page cache, the API server's watch cache; not counted
    for kept in (direct.walls, direct.cpus, direct.rss_kib, direct.codes):
        kept.clear()
    direct.notes.clear()
    alternate(contenders, repeat, log)
    peer_note = "not run (--peer-repeat 0)"
    if peer_repeat > 0:
        version = peers.kubernetes_core_version()
        if version is None:
            peer_note = f"not run: kubernetes.core is not in {peers.ROOT} (make it with python -m bench.peers)"
        else:
            peer = k8s_info_contender(kubeconfig, peers.ROOT)
            alternate([peer], peer_repeat, log)
            contenders.append(peer)
            peer_note = f"kubernetes.core {version}"
    return {
        "contenders": [c.summary() for c in contenders],
        "sizes": list_sizes(kubeconfig) if with_kubectl else {},
        "kubernetes_core": peer_note,
    }


# --- labels ---------------------------------------------------------------------------------


def label_commands(kubectl: list[str]) -> list[list[str]]:
    """One `kubectl label` per model, selecting the nodes by the label that names the model."""
    commands = []
    for model in fleet_scale.MODELS:
        source = model.labels[model.source_key]
        value = label_value_for(source, {})
        commands.append(
            kubectl
            + ["label", "nodes", "-l", f"{model.source_key}={source}", f"{DEFAULT_LABEL_KEY}={value}", "--overwrite"]
        )
    return commands


class Cluster:
    """What the label benchmark does to the cluster outside the timed commands."""

    def __init__(self, kubeconfig: str) -> None:
        self.client = fleet_scale.make_client(kubeconfig, pool=64)

    def node_patches(self) -> int:
        """Node PATCH requests (no subresource) the API server has served since it started."""
        total = 0.0
        for line in self.client.read_text("/metrics").splitlines():
            match = _PATCH_NODES.match(line)
            if not match:
                continue
            labels = dict(re.findall(r'(\w+)="([^"]*)"', match["labels"]))
            if labels.get("verb") == "PATCH" and labels.get("resource") == "nodes" and not labels.get("subresource"):
                total += float(match["value"])
        return int(total)

    def strip(self) -> int:
        """Remove the accelerator label and the ownership annotation from every node that has either."""
        patch = {"metadata": {"labels": {DEFAULT_LABEL_KEY: None}, "annotations": {OWNERSHIP_ANNOTATION: None}}}
        names = [
            item["metadata"]["name"]
            for item in self.client.list_items(NODES, page_size=1000)
            if DEFAULT_LABEL_KEY in (item["metadata"].get("labels") or {})
            or OWNERSHIP_ANNOTATION in (item["metadata"].get("annotations") or {})
        ]
        fleet_scale.run_bounded(names, lambda name: self.client.patch_merge(f"{NODES}/{name}", patch), 32)
        return len(names)

    def labeled(self) -> int:
        return sum(1 for value in self.labels().values() if value is not None)

    def labels(self) -> dict[str, str | None]:
        """Each node's accelerator label (None: none)."""
        return {
            item["metadata"]["name"]: (item["metadata"].get("labels") or {}).get(DEFAULT_LABEL_KEY)
            for item in self.client.list_items(NODES, page_size=1000)
        }

    def model_values(self) -> list[dict[str, str]]:
        """{name, value} for each fleet node, the value as the kubectl commands give it (per model)."""
        wanted = []
        for item in self.client.list_items(NODES, page_size=1000):
            labels = item["metadata"].get("labels") or {}
            for model in fleet_scale.MODELS:
                source = model.labels[model.source_key]
                if labels.get(model.source_key) == source:
                    wanted.append({"name": item["metadata"]["name"], "value": label_value_for(source, {}) or ""})
                    break
        return wanted


def k8s_patched_contender(kubeconfig: str, collections: Path, nodes_file: Path) -> Contender:
    """The peer: a kubernetes.core.k8s `state: patched` loop, one node per iteration."""
    t = tools()
    env = ansible_env()
    env["ANSIBLE_COLLECTIONS_PATH"] = f"{env['ANSIBLE_COLLECTIONS_PATH']}:{collections}"
    command = playbook_command(t, kubeconfig, "label_k8s_patched.yml")
    return Contender(LABEL_PEER, [command[:-1] + ["-e", f"@{nodes_file}", command[-1]]], env=env)


LABEL_PEER = "kubernetes.core.k8s state: patched, one node a loop item, cold (peer)"


def bench_labels(
    kubeconfig: str, repeat: int, log: Callable[[str], None], peer_repeat: int = 0, peer_nodes: int | None = None
) -> dict[str, Any]:
    t = tools()
    cluster = Cluster(kubeconfig)
    nodes = sum(1 for _node in cluster.client.list_items(NODES, page_size=1000))
    kubectl = [t["kubectl"], "--kubeconfig", kubeconfig]
    mark: dict[str, Any] = {}

    def cold_before() -> None:
        cluster.strip()
        mark["labels"] = cluster.labels()
        if any(mark["labels"].values()):
            raise RuntimeError("nodes still labeled after stripping")
        time.sleep(1)  # let the strip patches settle out of the API server's counters
        mark["patches"] = cluster.node_patches()

    def warm_before() -> None:
        mark["labels"] = cluster.labels()
        mark["patches"] = cluster.node_patches()

    def after(cold: bool, module: bool | str) -> Callable[[Contender, str], None]:
        def check(contender: Contender, output: str) -> None:
            check_ok(contender, output)
            server = cluster.node_patches() - mark["patches"]
            contender.notes.setdefault("server_patches", []).append(server)
            now = cluster.labels()
            labeled = sum(1 for value in now.values() if value is not None)
            contender.notes.setdefault("labeled_nodes", []).append(labeled)
            changed = sum(1 for name, value in now.items() if mark["labels"].get(name) != value)
            contender.notes.setdefault("nodes_changed", []).append(changed)
            if module == "direct":
                result = json.loads(output.strip().splitlines()[-1])
                contender.notes.setdefault("module_writes", []).append(result["writes"])
                contender.notes.setdefault("module_counts", []).append(result["counts"])
            elif module:
                match = re.search(r'"msg": "BENCH (\{.*\})"', output) or re.search(r"BENCH (\{.*\})", output)
                if not match:
                    raise RuntimeError(f"{contender.name}: no BENCH line in the playbook output")
                result = json.loads(match.group(1).replace('\\"', '"'))
                contender.notes.setdefault("module_writes", []).append(result["writes"])
                contender.notes.setdefault("module_counts", []).append(result["counts"])
            if cold and labeled != nodes:
                raise RuntimeError(f"{contender.name}: {labeled} of {nodes} nodes labeled")

        return check

    module_cold = Contender(
        "gpu_node_label via ansible-playbook, cold",
        [playbook_command(t, kubeconfig, "label.yml")],
        env=ansible_env(),
        capture=True,
        before=cold_before,
        after=after(True, True),
    )
    module_warm = Contender(
        "gpu_node_label via ansible-playbook, warm",
        [playbook_command(t, kubeconfig, "label.yml")],
        env=ansible_env(),
        capture=True,
        before=warm_before,
        after=after(False, True),
    )
    direct_warm = Contender(
        "gpu_node_label via module_utils, warm",
        [[t["python"], "-m", "bench.label_direct", "--kubeconfig", kubeconfig]],
        capture=True,
        before=warm_before,
        after=after(False, "direct"),
    )
    kubectl_cold = Contender(
        "kubectl label nodes -l <model> --overwrite, per model, cold",
        label_commands(kubectl),
        before=cold_before,
        after=after(True, False),
    )
    kubectl_warm = Contender(
        "kubectl label nodes -l <model> --overwrite, per model, warm",
        label_commands(kubectl),
        before=warm_before,
        after=after(False, False),
    )
    groups = [(module_cold, module_warm, direct_warm), (kubectl_cold, kubectl_warm)]
    for repetition in range(repeat):
        for group in groups[repetition % 2 :] + groups[: repetition % 2]:
            for contender in group:
                run_once(contender)
                log(
                    f"  [{repetition + 1}/{repeat}] {contender.name}: {contender.walls[-1]:.2f}s, "
                    f"server patches {contender.notes['server_patches'][-1]}, "
                    f"nodes changed {contender.notes['nodes_changed'][-1]}"
                )
    chosen = [module_cold, kubectl_cold, module_warm, direct_warm, kubectl_warm]
    peer_note = "not run (--peer-repeat 0)"
    version = peers.kubernetes_core_version()
    if peer_repeat > 0 and version is None:
        peer_note = f"not run: kubernetes.core is not in {peers.ROOT} (make it with python -m bench.peers)"
    elif peer_repeat > 0:
        # After the rounds, as the facts peer: at 0.4 s a node it would dominate the alternation.
        nodes_file = Path(tempfile.mkdtemp(prefix="bench-label-peer-")) / "nodes.json"
        wanted = cluster.model_values()[:peer_nodes]
        nodes_file.write_text(json.dumps({"label_nodes": wanted}))
        peer = k8s_patched_contender(kubeconfig, peers.ROOT, nodes_file)
        peer.before, peer.after = cold_before, after(len(wanted) == nodes, False)
        for repetition in range(peer_repeat):
            run_once(peer)
            log(
                f"  [peer {repetition + 1}/{peer_repeat}] {peer.name}: {peer.walls[-1]:.2f}s for {len(wanted)} "
                f"nodes, server patches {peer.notes['server_patches'][-1]}"
            )
        chosen.append(peer)
        peer_note = f"kubernetes.core {version}, {len(wanted)} nodes"
    return {
        "nodes": nodes,
        "label_commands": len(fleet_scale.MODELS),
        "kubernetes_core": peer_note,
        "contenders": [c.summary() for c in chosen],
    }


def label_lines(labels: dict[str, Any]) -> list[str]:
    """Per label contender: its time beside the PATCHes the API server served and the nodes it changed."""
    lines = []
    for contender in labels["contenders"]:
        notes = contender["notes"]
        patches, changed = statistics.median(notes["server_patches"]), statistics.median(notes["nodes_changed"])
        per_node = f", {contender['median'] / changed:.3f}s a node changed" if changed else ""
        lines.append(
            f"{contender['name']}: median {contender['median']:.2f}s{per_node}; server PATCHes {patches:g} "
            f"for {changed:g} nodes changed (runs: {notes['server_patches']} / {notes['nodes_changed']})"
        )
    return lines


def command_line(kubeconfig: str) -> str:
    """This run's command, the kubeconfig's path written KUBECONFIG."""
    words = [".venv/bin/python -m bench.bench_facts_labels", *sys.argv[1:]]
    return " ".join("KUBECONFIG" if word == kubeconfig else word for word in words)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--peer-repeat",
        type=int,
        default=1,
        help="runs of each kubernetes.core peer (k8s_info facts; k8s patched labels with --labels), 0 for none",
    )
    parser.add_argument("--labels", action="store_true", help="also the label benchmark")
    parser.add_argument("--label-repeat", type=int, default=3)
    parser.add_argument(
        "--label-peer-nodes",
        type=int,
        help="label only the first N nodes in the kubernetes.core k8s peer (default all)",
    )
    parser.add_argument(
        "--profile", type=Path, help="write a cProfile of the module_utils facts run here (and of a warm label run)"
    )
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument(
        "--all-dra-devices", action="store_true", help="also the facts with dra_devices=all (every DRA device listed)"
    )
    parser.add_argument(
        "--no-kubectl", action="store_true", help="leave out the kubectl peer (and the sizes of its JSON)"
    )
    parser.add_argument(
        "--baseline-ref",
        help="also the facts through ansible-playbook with this git ref's collection (git archive), alternating",
    )
    args = parser.parse_args()

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    started, load_start = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="kubegpu-bench-facts-"))
    try:
        baseline = (args.baseline_ref, extract(args.baseline_ref, work)) if args.baseline_ref else None
        facts = bench_facts(
            args.kubeconfig,
            args.repeat,
            log,
            peer_repeat=args.peer_repeat,
            baseline=baseline,
            all_dra_devices=args.all_dra_devices,
            with_kubectl=not args.no_kubectl,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results: dict[str, Any] = {
        "facts": facts,
        "command": command_line(args.kubeconfig),
        "started": started,
        "load_average": [load_start, os.getloadavg()[0]],
    }
    if args.labels:
        results["labels"] = bench_labels(
            args.kubeconfig, args.label_repeat, log, args.peer_repeat, args.label_peer_nodes
        )
    if args.profile:
        results["facts_profile"] = profile("bench.facts_direct", args.kubeconfig, args.profile)
        if args.labels:  # the fleet is labeled now: a warm run
            labels_out = args.profile.with_name(args.profile.stem + "-labels-warm.pstats")
            results["labels_warm_profile"] = profile("bench.label_direct", args.kubeconfig, labels_out)
    text = json.dumps(results, indent=2)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text)
    for contender in results["facts"]["contenders"] + results.get("labels", {}).get("contenders", []):
        print(
            f"{contender['name']}: median {contender['median']:.2f}s (min {contender['min']:.2f}, "
            f"max {contender['max']:.2f}), peak RSS {contender['peak_rss_mb']:.0f} MB"
        )
    if "labels" in results:
        print(f"labels on {results['labels']['nodes']} nodes; kubernetes.core: {results['labels']['kubernetes_core']}")
        print("\n".join(label_lines(results["labels"])))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    sys.exit(main())
