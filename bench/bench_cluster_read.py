# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_cluster_info's placement step against its baseline, the fleet facts step, from the same lists.

The stand-in API server of `bench_placement.py` (a child process on 127.0.0.1 with `fleet_scale.py`'s
nodes and pods, pages encoded once) serves the lists. Each round, in a fresh process, runs the module's
fleet step (it lists nodes, pods and the DRA objects through the shared lists, decodes and projects them,
and summarises the facts) and then its placement step (the same lists, answered from memory: the
projection, the view and the pending pods), and reports both times, the requests each sent (the placement
step must send none), the peak memory after each, and the size of each step's part of the result.

    python -m bench.bench_cluster_read --nodes 1000 --pods 20000 --repeat 3
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MODULE = ROOT / "plugins" / "modules" / "gpu_cluster_info.py"


def _peak_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def measure(kubeconfig: str) -> dict[str, Any]:
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import client_from_params
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.shared_lists import SharedLists

    spec = importlib.util.spec_from_file_location("gpu_cluster_info", MODULE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_cluster_info"] = module
    spec.loader.exec_module(module)
    run = module.Run(SharedLists(client_from_params({"kubeconfig": kubeconfig})), {"placement_pool_label_keys": []})
    started = time.perf_counter()
    fleet = module.fleet(run)
    fleet_seconds, fleet_requests, fleet_peak = time.perf_counter() - started, run.client.request_count, _peak_mb()
    started = time.perf_counter()
    placement = module.placement(run)
    return {
        "fleet": {
            "seconds": fleet_seconds,
            "requests": fleet_requests,
            "peak_rss_mb": fleet_peak,
            "bytes": len(json.dumps(fleet)),
        },
        "placement": {
            "seconds": time.perf_counter() - started,
            "requests": run.client.request_count - fleet_requests,
            "peak_rss_mb": _peak_mb(),
            "bytes": len(json.dumps(placement)),
        },
    }


def compare(nodes: int, pods: int, repeat: int) -> dict[str, Any]:
    from bench.bench_placement import FakeApi

    api = FakeApi(nodes, pods, Path(tempfile.mkdtemp(prefix="kubegpu-bench-")))
    try:
        runs = []
        for _round in range(repeat):
            done = subprocess.run(
                [sys.executable, "-m", "bench.bench_cluster_read", "measure", "--kubeconfig", str(api.kubeconfig)],
                cwd=ROOT,
                capture_output=True,
                text=True,
                check=True,
            )
            runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    finally:
        api.stop()
    return {
        step: {
            "seconds": round(statistics.median(r[step]["seconds"] for r in runs), 3),
            "requests": runs[0][step]["requests"],
            "peak_rss_mb": max(r[step]["peak_rss_mb"] for r in runs),
            "result_bytes": runs[0][step]["bytes"],
        }
        for step in ("fleet", "placement")
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    measure_parser = sub.add_parser("measure")
    measure_parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if args.command == "measure":
        print(json.dumps(measure(args.kubeconfig)))
        return 0
    result = compare(args.nodes, args.pods, args.repeat)
    fleet, placement = result["fleet"], result["placement"]
    names = {"fleet": "fleet facts (baseline)", "placement": "placement, same lists"}
    lines = [f"gpu_cluster_info at {args.nodes} nodes, {args.pods} pods (median of {args.repeat} runs)"]
    lines.append(" ".join(("step".ljust(24), *(c.rjust(10) for c in ("seconds", "requests", "peak MB", "result B")))))
    lines += [
        " ".join(
            (
                names[step].ljust(24),
                *(f"{value:10.3f}" if isinstance(value, float) else f"{value:10}" for value in row.values()),
            )
        )
        for step, row in result.items()
    ]
    ratio = (fleet["seconds"] + placement["seconds"]) / fleet["seconds"]
    lines.append(f"facts + placement against facts alone: {ratio:.2f}x")
    print("\n".join(lines))
    return 0 if placement["requests"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
