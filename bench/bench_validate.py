# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Time gpu-pod-validate, serial and with --jobs, beside the PyYAML C-loader parse floor and checkov, on one corpus.

Each contender runs in its own subprocess; repetitions alternate between contenders (rotating
the order) so that a slow spell of the machine hits them alike. Reported per contender: wall
time (median, min, max), CPU time (user + system, median) and peak RSS (max), as a Markdown
table, and the ratios of gpu-pod-validate, serial (`--jobs 1`) and with `--jobs N` worker
processes, to the parse floor, which parses in one process.

    python -m bench.bench_validate [--corpus DIR] [--deployments 5000] [--files 50] [--repeat 3] [--jobs 2]
                                   [--checkov PATH | --no-checkov] [--checkov-repeat N] [--json OUT]

Without --corpus a corpus is generated (bench/validate_corpus.py) in a temporary directory.
checkov runs only when found (--checkov PATH, or `checkov` on PATH); it is never installed.
At thousands of objects one checkov run takes minutes, so --checkov-repeat runs it in the first
N rounds only (it still alternates with the others in those rounds).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from bench.timing import run_command
from bench.validate_corpus import generate

REPO = Path(__file__).resolve().parents[1]

PARSE_FLOOR = """
import glob, os, sys, yaml
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.yaml"))):
    with open(path, encoding="utf-8") as handle:
        for _ in yaml.load_all(handle, Loader=yaml.CSafeLoader):
            pass
"""


@dataclass
class Contender:
    name: str
    command: list[str]
    env: dict[str, str] = field(default_factory=dict)
    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)
    rss_kib: list[int] = field(default_factory=list)
    codes: set[int] = field(default_factory=set)


def run_once(contender: Contender) -> None:
    """Run in a subprocess (bench/timing.py: wall, CPU of the tree, and the command's own peak RSS in KiB)."""
    wall, cpu, rss_kib, code, _output = run_command(contender.command, contender.env, capture=False)
    contender.walls.append(wall)
    contender.cpus.append(cpu)
    contender.rss_kib.append(rss_kib)
    contender.codes.add(code)


def find_checkov(explicit: str | None, disabled: bool) -> str | None:
    if disabled:
        return None
    if explicit:
        return explicit
    return shutil.which("checkov")


def contenders(corpus: Path, checkov: str | None, jobs: int = 2) -> list[Contender]:
    python = sys.executable
    validate = [python, str(REPO / "scripts" / "gpu-pod-validate"), "--fail-on", "never", "--quiet"]
    chosen = [
        Contender("gpu-pod-validate", [*validate, "--jobs", "1", str(corpus)]),
        Contender("PyYAML CSafeLoader parse floor", [python, "-c", PARSE_FLOOR, str(corpus)]),
    ]
    if jobs > 1:
        chosen.append(Contender(f"gpu-pod-validate --jobs {jobs}", [*validate, "--jobs", str(jobs), str(corpus)]))
    if checkov:
        chosen.append(
            Contender(
                "checkov --quiet --compact",
                [checkov, "-d", str(corpus), "--framework", "kubernetes", "--quiet", "--compact", "--skip-download"],
            )
        )
    return chosen


def summary(c: Contender) -> dict:
    return {
        "name": c.name,
        "command": c.command,
        "walls": c.walls,
        "cpus": c.cpus,
        "rss_kib": c.rss_kib,
        "codes": sorted(c.codes),
        "median": statistics.median(c.walls),
        "min": min(c.walls),
        "max": max(c.walls),
        "cpu_median": statistics.median(c.cpus),
        "peak_rss_mb": max(c.rss_kib) / 1024,
    }


def table(results: list[Contender]) -> str:
    rows = [
        "| Contender | Wall median (s) | Wall min (s) | Wall max (s) | CPU median (s) | Peak RSS (MB) | Exit |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for c in results:
        rows.append(
            f"| {c.name} | {statistics.median(c.walls):.2f} | {min(c.walls):.2f} | {max(c.walls):.2f} | "
            f"{statistics.median(c.cpus):.2f} | {max(c.rss_kib) / 1024:.0f} | "
            f"{','.join(map(str, sorted(c.codes)))} |"
        )
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, help="an existing corpus directory (default: generate one)")
    parser.add_argument("--deployments", type=int, default=5000)
    parser.add_argument("--files", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=2, help="worker processes of the parallel row (1: no such row)")
    parser.add_argument("--checkov", help="path of the checkov executable")
    parser.add_argument("--no-checkov", action="store_true", help="do not run checkov even when it is on PATH")
    parser.add_argument("--checkov-repeat", type=int, help="run checkov in the first N rounds only (default: all)")
    parser.add_argument("--json", type=Path, help="write the results here as JSON")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="gpu-validate-bench-") as scratch:
        corpus = args.corpus
        if corpus is None:
            corpus = Path(scratch) / "corpus"
            generate(corpus, args.deployments, args.files)
        files = sorted(corpus.glob("*.yaml"))
        size = sum(p.stat().st_size for p in files)
        print(
            f"Corpus: {corpus}, {len(files)} files, {size / 1e6:.1f} MB; {args.repeat} alternating repetitions; "
            f"{os.cpu_count()} CPUs\n"
        )
        results = contenders(corpus, find_checkov(args.checkov, args.no_checkov), args.jobs)
        checkov_rounds = args.repeat if args.checkov_repeat is None else args.checkov_repeat
        for repetition in range(args.repeat):
            shift = repetition % len(results)
            for contender in results[shift:] + results[:shift]:
                if contender.name.startswith("checkov") and repetition >= checkov_rounds:
                    continue
                run_once(contender)
                print(
                    f"  [{repetition + 1}/{args.repeat}] {contender.name}: {contender.walls[-1]:.2f}s",
                    file=sys.stderr,
                    flush=True,
                )
        print(table(results))
        ours, floor = results[0], results[1]
        wall_ratio = statistics.median(ours.walls) / statistics.median(floor.walls)
        cpu_ratio = statistics.median(ours.cpus) / statistics.median(floor.cpus)
        print(f"\ngpu-pod-validate / parse floor: {wall_ratio:.2f}x wall, {cpu_ratio:.2f}x CPU (target: at most 1.5x)")
        for c in results[2:]:
            if c.name.startswith("gpu-pod-validate --jobs"):
                ratio = statistics.median(c.walls) / statistics.median(floor.walls)
                print(
                    f"{c.name} / single-core parse floor: {ratio:.2f}x wall, "
                    f"{statistics.median(c.walls) / statistics.median(ours.walls):.2f}x serial (target: at most 0.65x)"
                )
            elif c.name.startswith("checkov"):
                speedup = statistics.median(c.walls) / statistics.median(ours.walls)
                print(f"checkov / gpu-pod-validate: {speedup:.1f}x wall (target: at least 50x)")
        if args.json:
            documents = sum(1 for p in files for line in p.read_text(encoding="utf-8").splitlines() if line == "---")
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(
                json.dumps(
                    {
                        "corpus": {
                            "files": len(files),
                            "bytes": size,
                            "deployments": args.deployments if args.corpus is None else None,
                            "documents": documents + len(files),
                        },
                        "repeat": args.repeat,
                        "checkov_repeat": checkov_rounds if any(c.name.startswith("checkov") for c in results) else 0,
                        "contenders": [summary(c) for c in results],
                    },
                    indent=2,
                )
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
