# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The health view's Prometheus part at scale: the fleet facts with the DCGM exporter's metrics beside the facts without.

A real Prometheus (Debian's /usr/bin/prometheus, tests/cluster/prometheus.py) scrapes the simulated DCGM exporters of
tests/cluster/dcgm_exporter.py: one target per GPU node of `fleet_scale.py`'s fleet (the fleet's node names in the
`node` target label and the snapshots' `Hostname`), 8 GPUs each, the presence metric, the last XID and every metric a
signal watches (all 0), so each signal's query reads real series; after every target's first scrape a handful of
nodes (--bad-nodes) get a new XID on one GPU, so the signals query returns series. Scrape and rule-evaluation
interval --scrape-interval (a subquery's step is the evaluation interval). The measuring starts once every target has
been scraped at least twice after that change and --history seconds of samples are in the TSDB (the default, 600, is
the option's default window of 10m: every step of the subqueries has data, as on a cluster's Prometheus).

The API side is `bench_placement.py`'s stand-in API server (a child process serving the fleet's nodes and pods page
by page, pages encoded once), so that 5,000 nodes need no cluster; --pods-per-node pods on each node.

At each size (--sizes, growing: the targets of the smaller size stay), alternating, order rotating, --repeat runs
each, every run in a fresh process:

- without: `read_fleet` + `summarise` + the result made JSON (as `facts_direct.py`);
- with: `read_fleet` with `read_metrics` beside it in a thread, as the modules read (`read_beside`; the option
  `prometheus: {url: ...}`, every other key its default) + `summarise(..., metrics)` + JSON.

Time: the run's own wall clock around those calls (the interpreter's start and imports left out). Memory: the
process's peak RSS as GNU time reports it (timing.py); added MB = median peak with - median peak without.
Queries: Prometheus's own counter `prometheus_http_requests_total` of its query and label-values handlers, read from its /metrics
page (not a query, so the reading does not count itself) before and after each run. Targets: the with run at most
1.15x the without (ratio of the medians), at most 50 MB more, and the same number of queries at every size; the
script exits 1 if one is missed. --profile writes a cProfile of one more with run at the largest size and prints its
top functions. Not part of bench.run (the waits for the scrapes and history take most of its time):

    .venv/bin/python -m bench.bench_prometheus_health --sizes 50,5000 --repeat 5
    .venv/bin/python -m bench.bench_prometheus_health --sizes 20,200 --repeat 2 --history 0   # a quick look
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.bench_placement import FakeApi

ROOT = Path(__file__).resolve().parents[1]
GPUS = 8
# Every metric a signal watches, 0 on every GPU, beside the exporter's defaults (presence, last XID).
HEALTH_VALUES: dict[str, float] = {
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": 0,
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": 0,
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": 0,
    "DCGM_FI_DEV_ROW_REMAP_PENDING": 0,
    "DCGM_FI_DEV_RETIRED_PENDING": 0,
}
# The new XIDs of the bad nodes, in turn: fallen off the bus, double-bit ECC, contained ECC, GSP timeout, and a
# workload XID (never a problem).
BAD_XIDS = (79, 48, 94, 119, 13)
# The API handlers the read's requests go to, as Prometheus's own request counter names them.
QUERY_HANDLERS = ('handler="/api/v1/query"', 'handler="/api/v1/label/:name/values"')
TARGETS = {"ratio": 1.15, "added_mb": 50.0}


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- one run, in a fresh process -----------------------------------------------------------------------


def measure(kubeconfig: str, prometheus: str | None, profile: str | None, recorded: bool = False) -> dict[str, Any]:
    """The facts as gpu_node_facts makes them, with the metrics read from `prometheus` when given."""
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.facts import summarise
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.prometheus_reads import (
        prometheus_source,
        read_beside,
    )
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.reads import read_fleet
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import options_from_params
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import client_from_params

    parts: dict[str, float] = {}

    def run() -> dict[str, Any]:
        started = time.perf_counter()
        client = client_from_params({"kubeconfig": kubeconfig})
        options = options_from_params()
        source = prometheus_source({"url": prometheus, "recorded": recorded}) if prometheus else None
        (nodes, pods, plugins, dra), metrics = read_beside(source, lambda: read_fleet(client, options, None, None, 500))
        parts["reads"] = time.perf_counter() - started
        at = time.perf_counter()
        result = summarise(nodes, pods, plugins, options, dra, metrics)
        parts["summarise"] = time.perf_counter() - at
        at = time.perf_counter()
        text = json.dumps({"changed": False, "ansible_facts": {"gpu_fleet": result}})
        parts["json"] = time.perf_counter() - at
        said = result.get("metrics") or {}
        health: dict[str, int] = {}
        problems: dict[str, int] = {}
        for node in result.get("nodes") or []:
            status = (node.get("health") or {}).get("status", "?")
            health[status] = health.get(status, 0) + 1
            for problem in (node.get("health") or {}).get("problems") or []:
                kind = str(problem.get("kind") or problem.get("code") or "?")
                problems[kind] = problems.get(kind, 0) + 1
        return {
            "nodes": len(nodes),
            "gpu_pods": len(pods),
            "api_requests": client.request_count,
            "prometheus_requests": metrics.requests if metrics else 0,
            "metrics_error": metrics.error if metrics else None,
            "metrics_unknown": len(said.get("unknown") or []) if isinstance(said, dict) else 0,
            "health": health,
            "problems": problems,
            "result_bytes": len(text),
        }

    started = time.perf_counter()
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        summary = profiler.runcall(run)
        profiler.dump_stats(profile)
    else:
        summary = run()
    summary["seconds"] = round(time.perf_counter() - started, 4)
    summary["parts"] = {k: round(v, 4) for k, v in parts.items()}
    return summary


# --- the exporters and Prometheus ----------------------------------------------------------------------


class Metrics:
    """The simulated exporters of the fleet's GPU nodes and a real Prometheus scraping them."""

    def __init__(self, interval: str, rule_files: list[Path]):
        from tests.cluster.dcgm_exporter import DcgmExporter
        from tests.cluster.prometheus import DcgmPrometheus, PrometheusServer

        exporter = DcgmExporter().start()
        try:
            server = PrometheusServer(
                exporter.address, scrape_interval=interval, evaluation_interval=interval, rule_files=rule_files
            ).start()
        except BaseException:
            exporter.stop()
            raise
        self.both = DcgmPrometheus(exporter, server)
        self.names: list[str] = []
        self.first_sample = 0.0

    @property
    def url(self) -> str:
        return self.both.url

    def stop(self) -> None:
        self.both.stop()

    def query_value(self, expr: str) -> float:
        found = self.both.prometheus.query(expr)
        return float(found[0]["value"][1]) if found else 0.0

    def scraped_since(self, since: float) -> int:
        """How many targets' last scrape began after `since` (the `up` sample's timestamp)."""
        return int(self.query_value(f'count(timestamp(up{{job="dcgm-exporter"}}) > {since:.3f})'))

    def wait_scraped(self, since: float, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while (done := self.scraped_since(since)) < len(self.names):
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{done} of {len(self.names)} targets scraped since {since:.0f} after {timeout:.0f}s"
                )
            time.sleep(2)

    def grow(self, names: list[str], bad: int) -> dict[str, Any]:
        """Serve these nodes (the ones served before among them), wait for their first scrape, give `bad`
        of them a new XID, and wait until every target has been scraped twice since."""
        from tests.cluster.dcgm_exporter import XID_METRIC, render_snapshot

        prometheus = self.both.prometheus
        interval = prometheus.interval_seconds
        started = time.time()
        new = [name for name in names if name not in set(self.names)]
        for name in new:
            self.both.exporter.set_node(name, render_snapshot(name, GPUS, HEALTH_VALUES))
        self.names = list(names)
        prometheus.set_nodes(self.names, wait=False)
        self.wait_scraped(started, 60 + 3 * interval)
        if not self.first_sample:
            self.first_sample = started
        changed = time.time()
        # Among the nodes new at this size: an XID set at an earlier size may be older than the window by now.
        pool = new or names
        step = max(1, len(pool) // bad) if bad else 0
        chosen = [pool[i * step] for i in range(min(bad, len(pool)))] if bad else []
        for turn, name in enumerate(chosen):
            xid = BAD_XIDS[turn % len(BAD_XIDS)]
            values: dict[str, Any] = {**HEALTH_VALUES, XID_METRIC: {turn % GPUS: xid}}
            self.both.exporter.set_node(name, render_snapshot(name, GPUS, values))
        self.wait_scraped(changed + interval, 60 + 3 * interval)
        up = int(self.query_value('count(up{job="dcgm-exporter"} == 1)'))
        series = int(self.query_value('count({__name__=~"DCGM_.*"})'))
        return {
            "targets_up": up,
            "dcgm_series": series,
            "bad_nodes": {name: BAD_XIDS[i % len(BAD_XIDS)] for i, name in enumerate(chosen)},
            "served_in_s": round(time.time() - started, 1),
        }

    def wait_history(self, seconds: float) -> float:
        """Wait until the TSDB holds `seconds` of samples; the seconds it holds."""
        left = self.first_sample + seconds - time.time()
        if left > 0:
            log(f"  waiting {left:.0f}s for {seconds:.0f}s of samples in the TSDB")
            time.sleep(left)
        return time.time() - self.first_sample

    def query_requests(self) -> int:
        """Prometheus's own count of the requests its query API answered, from its /metrics page."""
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=30) as response:
            text = response.read().decode()
        total = 0.0
        for line in text.splitlines():
            if line.startswith("prometheus_http_requests_total{") and any(h in line for h in QUERY_HANDLERS):
                total += float(line.rsplit(" ", 1)[1])
        return int(total)


def recording_rules(folder: Path) -> list[Path]:
    """The recording rules gpu_alert_rules renders for the facts' read at the option's default window."""
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.prometheus_reads import DEFAULTS
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dcgm_promql import recording_group

    path = folder / "recording-rules.yml"
    path.write_text(json.dumps({"groups": [recording_group(DEFAULTS["window"])]}))
    return [path]


# --- the stand-in API server ----------------------------------------------------------------------------


def serve(nodes: int, pods: int) -> None:
    """bench_placement.py's stand-in API server, with Nagle's algorithm off: its handler writes the headers and the
    body apart, and a small body's write would otherwise wait for the client's delayed ACK (about 40 ms a request,
    an API server's latency that the real one does not have)."""
    from http.server import ThreadingHTTPServer

    from bench.bench_placement import fleet_items, handler_for

    class Handler(handler_for(fleet_items(nodes, pods))):  # type: ignore[misc,valid-type]
        disable_nagle_algorithm = True

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


class StandInApi(FakeApi):
    """FakeApi, started from this module's serve."""

    def __init__(self, nodes: int, pods: int, folder: Path):
        command = [sys.executable, "-m", "bench.bench_prometheus_health", "serve", "--nodes", str(nodes)]
        self.process = subprocess.Popen([*command, "--pods", str(pods)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        port = int(self.process.stdout.readline())
        self.kubeconfig = folder / f"kubeconfig-{port}"
        self.kubeconfig.write_text(json.dumps(kubeconfig_for(port)))


def kubeconfig_for(port: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "stand-in", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "anonymous", "user": {}}],
        "contexts": [{"name": "stand-in", "context": {"cluster": "stand-in", "user": "anonymous"}}],
        "current-context": "stand-in",
    }


# --- the run -----------------------------------------------------------------------------------------


def run_measure(
    kubeconfig: Path, prometheus: str | None, profile: str | None = None, recorded: bool = False
) -> dict[str, Any]:
    from bench.timing import run_command

    argv = [sys.executable, "-m", "bench.bench_prometheus_health", "measure", "--kubeconfig", str(kubeconfig)]
    argv += ["--prometheus", prometheus] if prometheus else []
    argv += ["--recorded"] if prometheus and recorded else []
    argv += ["--profile", profile] if profile else []
    wall, cpu, rss_kib, code, out = run_command(argv, {"PYTHONHASHSEED": "0"}, capture=True)
    if code != 0:
        raise RuntimeError(f"a measured run failed (exit {code}): {out[-2000:]}")
    summary = json.loads(out.strip().splitlines()[-1])
    summary.update(process_wall=round(wall, 3), cpu=round(cpu, 3), peak_rss_mb=round(rss_kib / 1024, 1))
    return summary


def compare(metrics: Metrics, kubeconfig: Path, repeat: int, recorded: bool) -> dict[str, list[dict[str, Any]]]:
    runs: dict[str, list[dict[str, Any]]] = {"without": [], "with": []}
    for repetition in range(repeat):
        order = ("without", "with") if repetition % 2 == 0 else ("with", "without")
        for which in order:
            before = metrics.query_requests()
            result = run_measure(kubeconfig, metrics.url if which == "with" else None, recorded=recorded)
            result["queries_counted"] = metrics.query_requests() - before
            runs[which].append(result)
            log(
                f"  [{repetition + 1}/{repeat}] {which}: {result['seconds']:.3f}s, {result['peak_rss_mb']:.0f} MB, "
                f"queries {result['queries_counted']} {result['parts']}"
            )
    return runs


def row(nodes: int, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    without, with_ = runs["without"], runs["with"]
    t0 = statistics.median(r["seconds"] for r in without)
    t1 = statistics.median(r["seconds"] for r in with_)
    m0 = statistics.median(r["peak_rss_mb"] for r in without)
    m1 = statistics.median(r["peak_rss_mb"] for r in with_)
    counted = sorted({r["queries_counted"] for r in with_})
    return {
        "nodes": nodes,
        "without_s": t0,
        "with_s": t1,
        "without_range": [min(r["seconds"] for r in without), max(r["seconds"] for r in without)],
        "with_range": [min(r["seconds"] for r in with_), max(r["seconds"] for r in with_)],
        "ratio": t1 / t0,
        "pair_ratios": [w["seconds"] / o["seconds"] for w, o in zip(with_, without, strict=True)],
        "reads_without_s": statistics.median(r["parts"]["reads"] for r in without),
        "reads_with_s": statistics.median(r["parts"]["reads"] for r in with_),
        "without_mb": m0,
        "with_mb": m1,
        "added_mb": m1 - m0,
        "queries_counted": counted,
        "queries_without": sorted({r["queries_counted"] for r in without}),
        "requests_said": sorted({r["prometheus_requests"] for r in with_}),
        "health": with_[-1]["health"],
        "problems": with_[-1].get("problems"),
        "health_without": without[-1]["health"],
        "metrics_unknown": with_[-1]["metrics_unknown"],
        "metrics_error": with_[-1]["metrics_error"],
        "api_requests": with_[-1]["api_requests"],
        "gpu_pods": with_[-1]["gpu_pods"],
    }


def verdicts(rows: list[dict[str, Any]]) -> list[tuple[str, str, bool]]:
    top = rows[-1]
    counts = {tuple(r["queries_counted"]) for r in rows}
    same = len(counts) == 1 and all(len(r["queries_counted"]) == 1 for r in rows)
    said = ", ".join(f"{r['nodes']:,}: {'/'.join(map(str, r['queries_counted']))}" for r in rows)
    return [
        (
            f"time at {top['nodes']:,} nodes <= {TARGETS['ratio']}x",
            f"{top['ratio']:.3f}x",
            top["ratio"] <= TARGETS["ratio"],
        ),
        (
            f"memory added at {top['nodes']:,} nodes <= {TARGETS['added_mb']:.0f} MB",
            f"{top['added_mb']:+.1f} MB",
            top["added_mb"] <= TARGETS["added_mb"],
        ),
        ("the same queries at every size", said, same),
    ]


def print_table(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    print(
        f"\nfacts without and with the health view's Prometheus part; {args.pods_per_node} pods per node, {GPUS} GPUs "
        f"per node, scrape and evaluation interval {args.scrape_interval}; median of {args.repeat} alternating runs, "
        "each in a fresh process (time: the run's own clock; MB: peak RSS by GNU time)"
    )
    header = (
        f"{'nodes':>7} {'series/metric':>13} {'without s':>10} {'with s':>8} {'ratio':>7} {'reads s w/o':>11} {'reads s w':>9} "
        f"{'MB without':>10} {'MB with':>8} {'added MB':>9} {'queries':>8}"
    )
    print(header)
    for r in rows:
        print(
            f"{r['nodes']:>7,} {r['nodes'] * GPUS:>13,} {r['without_s']:>10.3f} {r['with_s']:>8.3f} {r['ratio']:>6.3f}x "
            f"{r['reads_without_s']:>11.3f} {r['reads_with_s']:>9.3f} {r['without_mb']:>10.1f} {r['with_mb']:>8.1f} {r['added_mb']:>+9.1f} "
            f"{'/'.join(map(str, r['queries_counted'])):>8}"
        )
    for r in rows:
        print(
            f"  {r['nodes']:,} nodes: without {r['without_range'][0]:.3f}-{r['without_range'][1]:.3f} s, with "
            f"{r['with_range'][0]:.3f}-{r['with_range'][1]:.3f} s, pair ratios "
            f"{', '.join(f'{x:.2f}' for x in r['pair_ratios'])}; queries counted in the without runs "
            f"{'/'.join(map(str, r['queries_without']))}, the read's own count {'/'.join(map(str, r['requests_said']))}; "
            f"health {r['health']} (without: {r['health_without']}), problems {r['problems']}, "
            f"unknown by metrics {r['metrics_unknown']}, read error {r['metrics_error']}"
        )


def print_profile(path: str, top: int = 15) -> None:
    print(f"\ncProfile of one with run (cumulative, top {top}): {path}")
    stats = pstats.Stats(path)
    stats.sort_stats("cumulative").print_stats(top)


@contextlib.contextmanager
def api_side(args: argparse.Namespace, size: int, scratch: Path) -> Iterator[Path]:
    """A kubeconfig for the fleet's API side at this size: the benchmark cluster grown to it, or the stand-in."""
    from bench import fleet_scale

    pods = size * args.pods_per_node
    if args.cluster:
        log(f"  growing the benchmark cluster's fleet to {size} nodes and {pods} pods")
        grown = fleet_scale.scale(args.kubeconfig, size, pods, workers=args.workers, timeout=3600, quiet=True)
        log(f"  {grown}")
        yield Path(args.kubeconfig)
        return
    log(f"  the stand-in API server: {size} nodes, {pods} pods")
    api = StandInApi(size, pods, scratch)
    try:
        yield api.kubeconfig
    finally:
        api.stop()


def run_sizes(args: argparse.Namespace, sizes: list[int]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """At each size: the API side, the exporters served and scraped, the alternating runs."""
    from bench import fleet_scale

    rows: list[dict[str, Any]] = []
    served: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="kubegpu-bench-prom-") as scratch:
        metrics = Metrics(args.scrape_interval, recording_rules(Path(scratch)) if args.recorded else [])
        log(f"Prometheus {metrics.url} (scrape and evaluation interval {args.scrape_interval})")
        try:
            for size in sizes:
                with api_side(args, size, Path(scratch)) as kubeconfig:
                    log(f"{size} GPU nodes: serving their exporters")
                    fleet = metrics.grow([fleet_scale.node_name(i) for i in range(size)], args.bad_nodes)
                    served.append({"nodes": size, **fleet})
                    log(f"  {fleet}")
                    if size == sizes[-1] and args.history:
                        fleet["history_s"] = round(metrics.wait_history(args.history))
                    rows.append(row(size, compare(metrics, kubeconfig, args.repeat, args.recorded)))
                    if args.profile and size == sizes[-1]:
                        profiled = run_measure(kubeconfig, metrics.url, args.profile, args.recorded)
                        log(f"  profiled with run: {profiled['seconds']:.3f}s {profiled['parts']}")
        finally:
            metrics.stop()
            log("Prometheus and the exporters stopped")
    return rows, served


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    measure_parser = sub.add_parser("measure", help="one run in this process (what the benchmark starts)")
    measure_parser.add_argument("--kubeconfig", required=True)
    measure_parser.add_argument("--prometheus", help="Prometheus's URL: the with run")
    measure_parser.add_argument("--profile")
    measure_parser.add_argument("--recorded", action="store_true", help="read the recording rules' series")
    serve_parser = sub.add_parser("serve", help="the stand-in API server (what the benchmark starts)")
    serve_parser.add_argument("--nodes", type=int, required=True)
    serve_parser.add_argument("--pods", type=int, required=True)
    parser.add_argument("--sizes", default="50,5000", help="GPU nodes at each step, growing")
    parser.add_argument("--pods-per-node", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--scrape-interval", default="30s", help="and the rule evaluation interval (subquery step)")
    parser.add_argument("--bad-nodes", type=int, default=5, help="nodes given a new XID at each size")
    parser.add_argument("--history", type=float, default=600, help="seconds of samples before the largest size's runs")
    parser.add_argument("--cluster", action="store_true", help="the API side on bench/run.py's benchmark cluster")
    parser.add_argument("--keep-cluster", action="store_true", help="with --cluster: leave it running")
    parser.add_argument("--workers", type=int, default=24, help="with --cluster: concurrent creates while scaling")
    parser.add_argument("--profile", help="write a cProfile of one with run at the largest size here")
    parser.add_argument("--json", dest="json_file", help="write the numbers here too")
    parser.add_argument(
        "--recorded",
        action="store_true",
        help="Prometheus evaluates the recording rules of gpu_alert_rules (record_window: the default window) and "
        "the with runs read them (prometheus.recorded)",
    )
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    if args.command == "measure":
        print(json.dumps(measure(args.kubeconfig, args.prometheus, args.profile, args.recorded)))
        return 0
    if args.command == "serve":
        serve(args.nodes, args.pods)
        return 0
    sizes = sorted(int(size) for size in args.sizes.split(","))
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    if args.cluster:
        from bench.run import CLUSTER_ENV, cluster

        log(f"benchmark cluster in {CLUSTER_ENV['KUBEGPU_CLUSTER_DIR']}")
        args.kubeconfig = cluster("up")
    try:
        rows, served = run_sizes(args, sizes)
    finally:
        if args.cluster and not args.keep_cluster:
            log(f"stopping the benchmark cluster: {cluster('down')}")
    print_table(rows, args)
    for r, fleet in zip(rows, served, strict=True):
        print(f"  served at {r['nodes']:,}: {fleet}")
    results = verdicts(rows)
    for what, measured, ok in results:
        print(f"{'PASS' if ok else 'FAIL'}  {what}: {measured}")
    if args.profile:
        print_profile(args.profile)
    if args.json_file:
        numbers = {"args": vars(args), "started": started, "rows": rows, "served": served}
        Path(args.json_file).write_text(json.dumps(numbers, indent=1))
    return 0 if all(ok for _what, _measured, ok in results) else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
