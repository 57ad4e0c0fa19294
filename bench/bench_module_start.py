"""One short module run, this checkout against another commit, side by side: wall time, CPU and peak RSS.

The module (gpu_node_facts by default) runs as Ansible runs it on the target, one process reading its
arguments from a file, against a small cluster (the second local instance's 2 nodes, say). The other
commit's collection is taken out with `git archive` into a temporary folder and put first on PYTHONPATH;
both run with PYTHONDONTWRITEBYTECODE=1, so the collection's files are compiled in every run, as from
AnsiballZ's zip. Rounds alternate (bench/timing.py).

    .venv/bin/python -m bench.bench_module_start --kubeconfig KUBECONFIG --baseline main --repeat 10
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.timing import Contender, alternate

REPO_ROOT = Path(__file__).resolve().parents[1]


def extract(ref: str, folder: Path) -> Path:
    """The collection at `ref` as ansible_collections/kubegpu/scheduling under `folder`."""
    target = folder / "ansible_collections" / "kubegpu"
    target.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "archive", "--format=tar", "--prefix=scheduling/", ref],
        capture_output=True,
        check=True,
    )
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    return target / "scheduling"


def contender(name: str, collection: Path, module: str, args: Path, pythonpath: str | None) -> Contender:
    env = {"PYTHONDONTWRITEBYTECODE": "1"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    command = [sys.executable, str(collection / "plugins" / "modules" / f"{module}.py"), str(args)]
    return Contender(name, [command], env=env)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--baseline", default="main", help="the git ref to compare with")
    parser.add_argument("--module", default="gpu_node_facts")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--json", help="write the contenders' figures here")
    options = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kubegpu-bench-start-"))
    try:
        args = work / "args.json"
        args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {"kubeconfig": options.kubeconfig}}))
        baseline = extract(options.baseline, work / "baseline")
        contenders = [
            contender("this checkout", REPO_ROOT, options.module, args, None),
            contender(options.baseline, baseline, options.module, args, str(work / "baseline")),
        ]
        alternate(contenders, options.repeat, log=lambda line: print(line, file=sys.stderr))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows = ["| Run | Wall median (s) | Wall min (s) | Wall max (s) | CPU median (s) | Peak RSS (MB) | Runs |"]
    rows.append("|---|---:|---:|---:|---:|---:|---:|")
    for c in contenders:
        if any(c.codes):
            raise SystemExit(f"{c.name}: exit codes {c.codes}")
        s = c.summary()
        rows.append(
            f"| {options.module}, {c.name} | {s['median']:.3f} | {s['min']:.3f} | {s['max']:.3f} | "
            f"{s['cpu_median']:.3f} | {s['peak_rss_mb']:.1f} | {len(c.walls)} |"
        )
    print("\n".join(rows))
    if options.json:
        Path(options.json).write_text(json.dumps([c.summary() for c in contenders], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
