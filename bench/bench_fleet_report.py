"""playbooks/fleet_report.yml over 40 inventory clusters, with forks 1 and forks 10 side by side.

The 40 clusters are served by two local control planes: the shared test cluster (`make cluster-up`)
and a second instance on its own ports and state (tests/cluster/instance.py, the fleet of
tests/cluster/fleet-second.yaml), stopped and removed at the end whatever happens. Each gets one
kubeconfig with 20 contexts (all to its API server and admin user); each inventory host is one
context. The runs alternate (bench/timing.py); each must exit 0 with a report of 40 clusters, none
failed. The gpu_fleet_report step alone is timed from the JUnit callback's per-task times, and the
report's model and three renders of the 40 clusters' results in process.

Run under the cluster lock, the shared cluster up:

    flock /tmp/kubegpu-cluster.lock sh -c 'make cluster-up >/dev/null && .venv/bin/python -m bench.bench_fleet_report'

Every run writes the report with the same generated_at. `--baseline-playbook REF` adds the
playbooks/fleet_report.yml of a git ref run with this checkout's collection (the same modules, the
playbook as it was), `--baseline-ref REF` the playbook and collection of a ref (git archive); each
alternates with this checkout's. At the end each contender's last report (JSON, Markdown, HTML) is
compared with this checkout's first, the times of each cluster's read written T in both.

`--then 'COMMAND'` runs a shell command while both clusters are up, with INVENTORY, PLAYBOOK and
REPORT_DIR in its environment (another timer over the same inventory, say).
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
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from bench.bench_module_start import extract
from bench.timing import Contender, alternate
from tests.cluster import cluster as local_cluster
from tests.cluster import instance

REPO_ROOT = Path(__file__).resolve().parents[1]
PLAYBOOK = REPO_ROOT / "playbooks" / "fleet_report.yml"
BIN = Path(sys.executable).parent
REPORT_STEP = "Write the fleet report"
GENERATED_AT = "2026-12-01T00:00:00+00:00"  # the same in every run, so that reports compare
ELAPSED_JSON = re.compile(r'("elapsed_seconds": )[0-9.e+-]+')
SECONDS = re.compile(r"\b[0-9]+(?:\.[0-9]+)? s\b")
# A contender's label, the collection taken out of another ref (None: this checkout's) and the playbook of
# another ref (None: the collection's own).
Baseline = tuple[str, Path | None, Path | None]


def many_contexts(kubeconfig: Path, prefix: str, count: int) -> dict:
    """A kubeconfig whose `count` contexts all lead to the cluster and user of `kubeconfig`'s current context."""
    config = yaml.safe_load(kubeconfig.read_text())
    current = next(c for c in config["contexts"] if c["name"] == config["current-context"])["context"]
    contexts = [{"name": f"{prefix}-{index:02d}", "context": dict(current)} for index in range(count)]
    return {**config, "contexts": contexts, "current-context": contexts[0]["name"]}


def write_inventory(folder: Path, kubeconfigs: dict[str, Path], per_cluster: int) -> Path:
    """One inventory host per context, across the clusters' generated kubeconfigs."""
    hosts = {}
    for prefix, source in kubeconfigs.items():
        config = many_contexts(source, prefix, per_cluster)
        path = folder / f"{prefix}.kubeconfig"
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        for context in config["contexts"]:
            hosts[context["name"]] = {"kubegpu_kubeconfig": str(path), "kubegpu_context": context["name"]}
    inventory = {
        "all": {"hosts": hosts, "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}
    }
    path = folder / "clusters.yml"
    path.write_text(yaml.safe_dump(inventory))
    return path


def playbook_env(junit_dir: Path) -> dict[str, str]:
    env = dict(
        os.environ,
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_LOCALHOST_WARNING="0",
        ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
        ANSIBLE_CALLBACKS_ENABLED="ansible.builtin.junit",
        JUNIT_OUTPUT_DIR=str(junit_dir),
    )
    for key in ("KUBECONFIG", "K8S_AUTH_KUBECONFIG"):
        env.pop(key, None)
    return env


def report_step_seconds(junit_dir: Path) -> list[float]:
    """The gpu_fleet_report task's time in each JUnit file the runs left."""
    times = []
    for path in sorted(junit_dir.glob("*.xml")):
        for case in ET.parse(path).iter("testcase"):
            if REPORT_STEP in (case.get("name") or ""):
                times.append(float(case.get("time") or 0))
    return times


def table(contenders: list[Contender]) -> str:
    rows = [
        "| Run | Wall median (s) | Wall min (s) | Wall max (s) | CPU median (s) | Peak RSS (MB) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for c in contenders:
        data = c.summary()
        rows.append(
            f"| {c.name} | {data['median']:.1f} | {data['min']:.1f} | {data['max']:.1f} | {data['cpu_median']:.1f} | "
            f"{data['peak_rss_mb']:.0f} |"
        )
    return "\n".join(rows)


def check_report(report_dir: Path, clusters: int):
    def after(contender: Contender, _stdout: str) -> None:
        report = json.loads((report_dir / "gpu-fleet-report.json").read_text())
        read = report["totals"]["clusters"]
        if contender.codes[-1] != 0 or read != clusters or report["failed_clusters"]:
            raise SystemExit(
                f"{contender.name}: exit {contender.codes[-1]}, {read} clusters, failed {report['failed_clusters']}"
            )
        contender.notes.setdefault("gpus", report["totals"]["capacity"])

    return after


def in_process_build(report_dir: Path, repeat: int) -> float:
    """Median seconds to build the model and render it three ways, in process, from the last run's clusters
    (the report's own cluster results are not the module's input, so the fixtures' real outputs are used,
    one copy per cluster of the run)."""
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.report.files import FORMATS
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.report.model import build_report

    fixtures = REPO_ROOT / "tests" / "unit" / "fixtures" / "report"
    results = {
        s: json.loads((fixtures / f"local-{s}.json").read_text()) for s in ("fleet", "device_plugin", "pod_audit")
    }
    names = [c["name"] for c in json.loads((report_dir / "gpu-fleet-report.json").read_text())["clusters"]]
    clusters = [{"name": name, **results, "elapsed_seconds": 1.0} for name in names]
    walls = []
    for _round in range(repeat):
        began = time.perf_counter()
        report = build_report(clusters)
        for _suffix, render in FORMATS.values():
            render(report)
        walls.append(time.perf_counter() - began)
    return statistics.median(walls)


def git_show(ref: str, path: str) -> str:
    return subprocess.run(
        ["git", "-C", str(REPO_ROOT), "show", f"{ref}:{path}"], capture_output=True, text=True, check=True
    ).stdout


@contextmanager
def _removed(folder: Path) -> Iterator[Path]:
    """The work folder (its kubeconfigs hold the admin credentials), removed on the way out."""
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def normalised(report_dir: Path) -> dict[str, str]:
    """The report's three files with the times a run measures (each cluster's read) written T."""
    texts = {}
    for path in sorted(report_dir.glob("gpu-fleet-report.*")):
        text = ELAPSED_JSON.sub(r"\1T", path.read_text())
        texts[path.suffix] = SECONDS.sub("T s", text)
    return texts


def compare_reports(contenders: list[Contender]) -> list[str]:
    """Each contender's last report against the first contender's, apart from the times."""
    first = normalised(Path(contenders[0].notes["report_dir"]))
    lines = []
    for other in contenders[1:]:
        theirs = normalised(Path(other.notes["report_dir"]))
        differ = [suffix for suffix in sorted(set(first) | set(theirs)) if first.get(suffix) != theirs.get(suffix)]
        verdict = f"differ in {', '.join(differ)}" if differ else "byte for byte the same apart from times"
        lines.append(f"report of {other.name} against {contenders[0].name} ({', '.join(sorted(first))}): {verdict}")
    return lines


def report_contender(work: Path, inventory: Path, clusters: int, forks: int, baseline: Baseline) -> Contender:
    """fleet_report.yml with `forks`: this checkout's; or, where `baseline` says, another ref's playbook with this
    checkout's collection, or another ref's playbook and collection."""
    label, collection, playbook = baseline
    tag = f"forks-{forks}{'-' + label.strip(' ()').replace(' ', '-') if label else ''}"
    report_dir, junit_dir = work / f"report-{tag}", work / f"junit-{tag}"
    playbook = playbook or ((collection / "playbooks" / "fleet_report.yml") if collection else PLAYBOOK)
    command = [str(BIN / "ansible-playbook"), "-i", str(inventory), "--forks", str(forks), str(playbook)]
    command += ["-e", f"kubegpu_report_dir={report_dir}", "-e", f"kubegpu_report_generated_at={GENERATED_AT}"]
    env = playbook_env(junit_dir)
    if collection is None:
        # This checkout, whatever other copy of the collection is installed.
        collection = work / "this" / "ansible_collections" / "kubegpu" / "scheduling"
        if not collection.exists():
            collection.parent.mkdir(parents=True)
            collection.symlink_to(REPO_ROOT)
    env.update(ANSIBLE_COLLECTIONS_PATH=str(collection.parents[2]), ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false")
    return Contender(
        f"fleet_report.yml, {clusters} clusters, forks {forks}{label}",
        [command],
        env=env,
        after=check_report(report_dir, clusters),
        notes={"junit": str(junit_dir), "report_dir": str(report_dir)},
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-cluster", type=int, default=20, help="contexts (inventory clusters) per local cluster")
    parser.add_argument("--forks", default="1,10", help="the fork counts to compare")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--then", help="a shell command to run while both clusters are up")
    parser.add_argument(
        "--baseline-ref",
        help="also run this git ref's playbook and collection (git archive), alternating with this checkout's",
    )
    parser.add_argument(
        "--baseline-playbook",
        help="also run this git ref's playbooks/fleet_report.yml with this checkout's collection, alternating",
    )
    parser.add_argument(
        "--second-ports",
        help="etcd,apiserver,kwok ports of the second instance (default: tests/cluster/instance.py's)",
    )
    args = parser.parse_args()

    shared = local_cluster.Layout(local_cluster.state_dir())
    if not local_cluster.running(shared):
        raise SystemExit("the shared local cluster is not running: make cluster-up (under the cluster lock)")
    work = Path(tempfile.mkdtemp(prefix="kubegpu-bench-fleet-report-"))
    ports = None
    if args.second_ports:
        names = ("KUBEGPU_ETCD_PORT", "KUBEGPU_APISERVER_PORT", "KUBEGPU_KWOK_PORT")
        ports = dict(zip(names, (int(p) for p in args.second_ports.split(",")), strict=True))
    with instance.started(ports=ports, prefix="kubegpu-bench-second-") as second, _removed(work):
        inventory = write_inventory(work, {"shared": shared.kubeconfig, "second": second.kubeconfig}, args.per_cluster)
        clusters = 2 * args.per_cluster
        baselines: list[Baseline] = [("", None, None)]
        if args.baseline_ref:
            baselines.append((f" ({args.baseline_ref})", extract(args.baseline_ref, work / "baseline"), None))
        if args.baseline_playbook:
            old_playbook = work / f"fleet_report-{args.baseline_playbook}.yml"
            old_playbook.write_text(git_show(args.baseline_playbook, "playbooks/fleet_report.yml"))
            baselines.append((f" (the playbook of {args.baseline_playbook})", None, old_playbook))
        contenders = [
            report_contender(work, inventory, clusters, forks, baseline)
            for forks in (int(f) for f in args.forks.split(","))
            for baseline in baselines
        ]
        alternate(contenders, args.repeat, log=lambda line: print(line, flush=True))
        print(f"\n{clusters} inventory clusters (contexts) on 2 local clusters, {args.repeat} runs each:\n")
        print(table(contenders))
        print()
        for one in contenders:
            for other in contenders:
                if other is not one and (one.name in other.name or one is contenders[0]):
                    ratio = statistics.median(one.walls) / statistics.median(other.walls)
                    print(f"{one.name} / {other.name}: {ratio:.2f}x wall (medians)")
        for contender in contenders:
            steps = report_step_seconds(Path(contender.notes["junit"]))
            print(
                f"gpu_fleet_report step ({contender.name}): median {statistics.median(steps):.2f} s over {len(steps)} runs"
            )
        print("\n".join(compare_reports(contenders)))
        last = Path(contenders[-1].notes["report_dir"])
        print(
            f"model + JSON, Markdown, HTML of {clusters} clusters in process: {in_process_build(last, 5) * 1000:.0f} ms"
        )
        if args.then:
            env = dict(
                os.environ, INVENTORY=str(inventory), PLAYBOOK=str(PLAYBOOK), REPORT_DIR=str(work / "report-then")
            )
            subprocess.run(args.then, shell=True, env=env, check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
