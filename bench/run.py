# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run every benchmark once and write docs/benchmarks.md and docs/benchmark-facts-scaling.png.

1. Validation: gpu-pod-validate, the PyYAML C-loader parse floor and checkov on a generated
   corpus (bench/bench_validate.py), before any cluster runs.
2. A separate local cluster (its own state folder and ports, so a test cluster keeps running
   undisturbed) with the base fleet of bench/fleet.yaml, scaled by bench/fleet_scale.py to each
   fleet size in turn; at each size the facts benchmark, and at the largest also the label
   benchmark and a cProfile of the facts run (bench/bench_facts_labels.py). The facts rounds at the
   largest size end with the kubernetes.core k8s_info peer (bench/peers.py makes it available).
3. With --dra-size N (default 1,000; 0 to skip), the cluster is made anew and filled with N nodes of
   which --dra-percent are DRA GPU nodes (bench/fleet_scale.py), and the facts are timed there
   against the same floors and peers (facts-dra-N.json; no labels: DRA nodes carry no model label
   for the kubectl baseline to select).
4. The cluster is stopped, and bench/report.py writes the results.

checkov and matplotlib live in their own virtual environment (--bench-venv), made here from
bench/requirements.txt when it is missing. Raw results go to bench/results/ (not committed).

    .venv/bin/python -m bench.run                        # the full run (about 40 minutes)
    .venv/bin/python -m bench.run --sizes 30 --pods-per-node 20 --repeat 2 --label-repeat 1 \\
        --validate-deployments 200 --validate-files 4 --dra-size 30 --quick   # a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import fleet_scale, peers
from tests.cluster import versions

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

CACHE = versions.cache_root()
CLUSTER_ENV = {
    "KUBEGPU_CLUSTER_DIR": str(CACHE / "bench-cluster"),
    "KUBEGPU_ETCD_PORT": "42379",
    "KUBEGPU_APISERVER_PORT": "46443",
    "KUBEGPU_KWOK_PORT": "40250",
    "KUBEGPU_FLEET": str(HERE / "fleet.yaml"),
}


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def bench_venv(path: Path) -> Path:
    python = path / "bin" / "python"
    if (
        not (path / "bin" / "checkov").exists()
        or subprocess.run([python, "-c", "import matplotlib"], capture_output=True, check=False).returncode
    ):
        log(f"making the benchmark's own virtual environment in {path}")
        subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
        subprocess.run([python, "-m", "pip", "install", "--quiet", "-r", str(HERE / "requirements.txt")], check=True)
    return path


def output_of(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return ""


def machine(venv: Path) -> dict[str, Any]:
    meminfo = Path("/proc/meminfo").read_text()
    total_kib = int(next(line.split()[1] for line in meminfo.splitlines() if line.startswith("MemTotal")))
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    bin_dir = sys.executable and Path(sys.executable).parent
    kubectl = versions.bin_dir() / "kubectl"
    kubectl_version = json.loads(output_of([str(kubectl), "version", "--client", "-o", "json"]) or "{}")
    return {
        "nproc": os.cpu_count(),
        "memory_gib": round(total_kib / 1024 / 1024, 1),
        "cpu": cpu,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "ansible_core": output_of([str(bin_dir / "python"), "-c", "import ansible; print(ansible.__version__)"]),
        "kubernetes_python": output_of(
            [str(bin_dir / "python"), "-c", "import kubernetes; print(kubernetes.__version__)"]
        ),
        "pyyaml": output_of([str(bin_dir / "python"), "-c", "import yaml; print(yaml.__version__)"]),
        "kubernetes": versions.KUBERNETES,
        "kubectl": (kubectl_version.get("clientVersion") or {}).get("gitVersion", ""),
        "etcd": versions.ETCD,
        "kwok": versions.KWOK,
        "checkov": output_of([str(venv / "bin" / "checkov"), "--version"]),
        "load_average_start": list(os.getloadavg()),
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }


def run_validation(args: argparse.Namespace, venv: Path) -> None:
    log(
        f"validation: {args.validate_deployments} Deployments in {args.validate_files} files, "
        f"{args.validate_repeat} rounds, checkov in {args.checkov_repeat}"
    )
    command = [
        sys.executable,
        "-m",
        "bench.bench_validate",
        "--deployments",
        str(args.validate_deployments),
        "--files",
        str(args.validate_files),
        "--repeat",
        str(args.validate_repeat),
        "--json",
        str(args.out / "validate.json"),
    ]
    command += (
        ["--no-checkov"]
        if args.no_checkov
        else ["--checkov", str(venv / "bin" / "checkov"), "--checkov-repeat", str(args.checkov_repeat)]
    )
    with (args.out / "validate.txt").open("w") as out:
        subprocess.run(command, check=True, stdout=out)
    log((args.out / "validate.txt").read_text().strip().splitlines()[-1])


def cluster(command: str) -> str:
    env = {**os.environ, **CLUSTER_ENV}
    done = subprocess.run(
        [sys.executable, "-m", "tests.cluster", command, "--timeout", "300"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode and command != "status":
        raise RuntimeError(f"cluster {command} failed: {done.stderr.strip()}")
    return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""


def run_cluster(args: argparse.Namespace) -> None:
    log(f"starting the benchmark cluster in {CLUSTER_ENV['KUBEGPU_CLUSTER_DIR']}")
    kubeconfig = cluster("up")
    try:
        scales = []
        for size in args.sizes:
            pods = size * args.pods_per_node
            log(f"scaling the fleet to {size} nodes and {pods} pods")
            report = fleet_scale.scale(kubeconfig, size, pods, workers=args.workers, quiet=True)
            scales.append(report)
            log(f"  {report}")
            largest = size == max(args.sizes)
            command = [
                sys.executable,
                "-m",
                "bench.bench_facts_labels",
                "--kubeconfig",
                kubeconfig,
                "--repeat",
                str(args.repeat if largest else args.scale_repeat),
                "--json",
                str(args.out / f"facts-{size}.json"),
            ]
            if largest:
                command += [
                    "--peer-repeat",
                    str(args.peer_repeat),
                    "--labels",
                    "--label-repeat",
                    str(args.label_repeat),
                    "--profile",
                    str(args.out / f"facts-{size}.pstats"),
                ]
            log(f"facts{' and labels' if largest else ''} at {size} nodes")
            command += ["--peer-repeat", "0"] if not largest else []
            subprocess.run(command, check=True)
        (args.out / "fleet.json").write_text(json.dumps(scales, indent=2))
        if args.dra_size:
            if args.sizes:
                log(f"making the benchmark cluster anew for the DRA fleet: {cluster('down')}")
                kubeconfig = cluster("up")
            run_dra_fleet(args, kubeconfig)
    finally:
        if args.keep_cluster:
            log(
                f"cluster left running; stop it with: "
                f"{' '.join(f'{k}={v}' for k, v in CLUSTER_ENV.items() if k == 'KUBEGPU_CLUSTER_DIR')} "
                f"{sys.executable} -m tests.cluster down"
            )
        else:
            log(f"stopping the benchmark cluster: {cluster('down')}")


def run_dra_fleet(args: argparse.Namespace, kubeconfig: str) -> None:
    """The facts on a fleet of which --dra-percent of the nodes are DRA GPU nodes."""
    size, pods = args.dra_size, args.dra_size * args.pods_per_node
    log(f"scaling the fleet to {size} nodes ({args.dra_percent}% DRA) and {pods} pods")
    report = fleet_scale.scale(
        kubeconfig, size, pods, workers=args.workers, timeout=2400, quiet=True, dra_percent=args.dra_percent
    )
    log(f"  {report}")
    (args.out / "fleet-dra.json").write_text(json.dumps([report], indent=2))
    out = args.out / f"facts-dra-{size}.json"
    command = [sys.executable, "-m", "bench.bench_facts_labels", "--kubeconfig", kubeconfig]
    command += ["--repeat", str(args.repeat), "--peer-repeat", str(args.peer_repeat), "--json", str(out)]
    log(f"facts at {size} nodes, {args.dra_percent}% DRA")
    subprocess.run(command, check=True)
    results = json.loads(out.read_text())
    results["command"] = " ".join([".venv/bin/python -m bench.run", *sys.argv[1:]])
    out.write_text(json.dumps(results, indent=2))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__
    )
    parser.add_argument(
        "--sizes",
        type=lambda s: [int(x) for x in s.split(",") if x],
        default=[100, 300, 1000],
        help="fleet sizes in nodes, comma-separated (default 100,300,1000; empty for none)",
    )
    parser.add_argument("--dra-size", type=int, default=1000, help="nodes of the mixed DRA fleet (0: none)")
    parser.add_argument("--dra-percent", type=int, default=50, help="DRA GPU nodes out of every 100 in it")
    parser.add_argument(
        "--peer-repeat", type=int, default=1, help="runs of the kubernetes.core k8s_info peer (0: none)"
    )
    parser.add_argument("--pods-per-node", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5, help="facts rounds at the largest size")
    parser.add_argument("--scale-repeat", type=int, default=3, help="facts rounds at the smaller sizes")
    parser.add_argument("--label-repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=24, help="concurrent creates while scaling")
    parser.add_argument("--validate-deployments", type=int, default=10000)
    parser.add_argument("--validate-files", type=int, default=100)
    parser.add_argument("--validate-repeat", type=int, default=3)
    parser.add_argument("--checkov-repeat", type=int, default=1)
    parser.add_argument("--no-checkov", action="store_true")
    parser.add_argument("--skip-validate", action="store_true")
    parser.add_argument("--skip-cluster", action="store_true")
    parser.add_argument("--keep-cluster", action="store_true")
    parser.add_argument("--bench-venv", type=Path, default=CACHE / "bench-venv")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--docs", type=Path, default=REPO / "docs", help="where the report goes")
    parser.add_argument("--quick", action="store_true", help="a smoke run: say so in the report")
    args = parser.parse_args()

    args.out.mkdir(parents=True, exist_ok=True)
    venv = bench_venv(args.bench_venv)
    started = time.monotonic()
    info = machine(venv)
    info["command"] = " ".join([".venv/bin/python -m bench.run", *sys.argv[1:]])
    info["quick"] = args.quick
    if not args.skip_validate:
        run_validation(args, venv)
    if not args.skip_cluster:
        if args.peer_repeat:
            log(f"kubernetes.core for the peer rows in {peers.ensure_kubernetes_core()}")
        run_cluster(args)
    info["load_average_end"] = list(os.getloadavg())
    info["duration_s"] = round(time.monotonic() - started)
    (args.out / "machine.json").write_text(json.dumps(info, indent=2))
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "bench.report", "--results", str(args.out), "--docs", str(args.docs)],
        check=True,
    )
    log(f"done in {info['duration_s']} s; report in {args.docs / 'benchmarks.md'}")
    return 0


if __name__ == "__main__":
    if shutil.which("openssl") is None:
        sys.exit("openssl is needed to start the local cluster")
    sys.exit(main())
