# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet facts at scale: 1,000, 2,500 and 5,000 GPU nodes with 20 pods each (100,000 at the top).

On the benchmark cluster (bench/run.py's state folder and ports; started here, or reused when it
runs), the fleet is grown size by size with bench/fleet_scale.py and, at each size, the facts are
timed against the floors (bench/facts_floors.py) and the fixed cost of an empty play, alternating
(bench/bench_facts_labels.py). kubectl, a peer, runs only up to --kubectl-up-to nodes: at 100,000
pods it prints about a gigabyte of JSON and needs over 10 GB. Each size's results go to
bench/results/scale-<nodes>.json; then bench/report.py --scale-only puts the section and the
scaling plot into docs/benchmarks.md. Not part of the tests or of bench/run.py:

    make bench-scale            # about an hour on 2 CPUs; 8 GB of memory at the top
    .venv/bin/python -m bench.scale --sizes 1000,2500,5000 --repeat 3 --keep-cluster
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from bench import fleet_scale
from bench.bench_facts_labels import bench_facts
from bench.run import CACHE, CLUSTER_ENV, HERE, bench_venv, cluster, machine


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,2500,5000", help="GPU nodes at each step, growing")
    parser.add_argument("--pods-per-node", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3, help="alternating rounds at each size")
    parser.add_argument("--kubectl-up-to", type=int, default=1000, help="the largest size kubectl runs at")
    parser.add_argument("--workers", type=int, default=24, help="concurrent creates while scaling")
    parser.add_argument("--keep-cluster", action="store_true")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--bench-venv", type=Path, default=CACHE / "bench-venv")
    args = parser.parse_args()
    sizes = sorted(int(size) for size in args.sizes.split(","))
    args.out.mkdir(parents=True, exist_ok=True)
    venv = bench_venv(args.bench_venv)
    log(f"benchmark cluster in {CLUSTER_ENV['KUBEGPU_CLUSTER_DIR']}")
    kubeconfig = cluster("up")
    try:
        for size in sizes:
            pods = size * args.pods_per_node
            log(f"growing the fleet to {size} nodes and {pods} pods")
            fleet = fleet_scale.scale(kubeconfig, size, pods, workers=args.workers, timeout=3600, quiet=True)
            log(f"  {fleet}")
            started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
            before = machine(venv)
            facts = bench_facts(kubeconfig, args.repeat, log, with_kubectl=size <= args.kubectl_up_to)
            result = {"fleet": fleet, "facts": facts, "started": started, "machine": before}
            (args.out / f"scale-{size}.json").write_text(json.dumps(result, indent=2))
    finally:
        if args.keep_cluster:
            log("benchmark cluster left running")
        else:
            log(f"stopping the benchmark cluster: {cluster('down')}")
    command = [str(venv / "bin" / "python"), "-m", "bench.report", "--scale-only", "--results", str(args.out)]
    return subprocess.run(command, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
