# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU health event source (extensions/eda/plugins/event_source/gpu_health.py) against its targets.

On the benchmark cluster of bench/run.py (its own state folder and ports, started here when it is not
running and stopped again at the end; --kubeconfig names another cluster instead), --nodes KWOK GPU nodes of
a model of their own are made. The source runs as its test harness (a child process printing its events),
with `initial: false`. Then:

1. Heartbeats: for --seconds, every node's Ready condition gets a new lastHeartbeatTime once per --period
   seconds (a strategic merge patch of the status, as a kubelet's report), by a pool of writers in this
   process. Measured: the source's CPU time over that window as a share of one core (/proc/PID/stat), its
   resident memory at the end and its peak (VmRSS, VmHWM), and the events it printed for the bench's nodes
   (target: none).
2. Event latency: --rounds times, XidCriticalError=True is written onto one node and the time until the
   source prints that node's transition to failed is taken (then the condition is cleared and its event
   awaited). Target: under 2 s.
3. Quarantine latency (unless --no-rulebook): the real ansible-rulebook runs kubegpu.scheduling.gpu_health
   with acting on; the condition is written onto one more node and the time until that node is cordoned
   with the collection's record is taken. Target: under 30 s.

Targets: at most 15% of one core and 150 MB, zero heartbeat events, at 5,000 nodes. Everything made is
deleted at the end. Run:

    .venv/bin/python -m bench.bench_eda_source --nodes 5000 --period 60 --seconds 120
    .venv/bin/python -m bench.bench_eda_source --nodes 1000 --period 20 --seconds 60   # a quicker look
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.fleet_scale import make_client, run_bounded
from bench.run import cluster as bench_cluster
from tests.cluster import fleet as fleet_file

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SOURCE = ROOT / "extensions" / "eda" / "plugins" / "event_source" / "gpu_health.py"
MODEL = "NVIDIA-EDABENCH-80GB"
TARGETS = {"cpu_share": 0.15, "rss_mb": 150.0, "heartbeat_events": 0, "event_s": 2.0, "quarantine_s": 30.0}
SMP = "application/strategic-merge-patch+json"
RUN_LABEL = "kubegpu-bench/eda-run"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_body(name: str, run: str) -> dict[str, Any]:
    spec = {"name": name, "cpu": "96", "memory": "1Ti", "labels": {"nvidia.com/gpu.product": MODEL, RUN_LABEL: run}}
    return fleet_file.node_object({**spec, "taints": [], "gpus": 8, "allocatable_gpus": 8})


def patch_status(client: Any, name: str, conditions: list[dict[str, Any]]) -> None:
    """A strategic merge patch of the node's status conditions (merged by type), through the collection's client."""
    client._json("PATCH", f"/api/v1/nodes/{name}/status", body={"status": {"conditions": conditions}}, content_type=SMP)


def xid(bad: bool) -> dict[str, Any]:
    return {
        "type": "XidCriticalError",
        "status": "True" if bad else "False",
        "reason": "bench",
        "message": "bench",
        "lastHeartbeatTime": now(),
        "lastTransitionTime": now(),
    }


class Source:
    """The source's harness as a child process; its events read from its output in a thread."""

    def __init__(self, kubeconfig: str) -> None:
        args = json.dumps({"kubeconfig": kubeconfig, "initial": False, "release_hold": 3600})
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.process = subprocess.Popen(
            [sys.executable, str(SOURCE), args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True
        )
        self.events: list[tuple[float, dict[str, Any]]] = []
        self.lock = threading.Lock()
        threading.Thread(target=self.read, daemon=True).start()

    def read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            event = json.loads(line)
            with self.lock:
                self.events.append((time.monotonic(), event))

    def seen(self, predicate: Any, after: float = 0.0) -> tuple[float, dict] | None:
        with self.lock:
            return next(((t, e) for t, e in self.events if t >= after and predicate(e)), None)

    def wait(self, predicate: Any, after: float, timeout: float, what: str) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.seen(predicate, after)
            if found:
                return found[0]
            time.sleep(0.01)
        raise SystemExit(f"timed out after {timeout:g} s waiting for {what}")

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def memory_mb(self) -> tuple[float, float]:
        status = dict(
            line.split(":", 1)
            for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines()
            if ":" in line
        )
        return int(status["VmRSS"].split()[0]) / 1024, int(status["VmHWM"].split()[0]) / 1024

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


def heartbeats(client: Any, names: list[str], period: float, seconds: float, workers: int) -> int:
    """Every node's heartbeat once per period for `seconds`, spread evenly; the number of patches sent."""
    sent = 0
    start = time.monotonic()
    interval = period / len(names)

    def beats():
        nonlocal sent
        index = 0
        while time.monotonic() - start < seconds:
            due = start + sent * interval
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            yield names[index % len(names)]
            index += 1
            sent += 1

    run_bounded(
        beats(), lambda name: patch_status(client, name, [{"type": "Ready", "lastHeartbeatTime": now()}]), workers
    )
    return sent


def quarantine_latency(kubeconfig: str, client: Any, name: str) -> float:
    """The real ansible-rulebook, acting on: condition written -> the node cordoned with the collection's record."""
    work = Path(tempfile.mkdtemp(prefix="bench-eda-"))
    (work / "ansible_collections" / "kubegpu").mkdir(parents=True)
    (work / "ansible_collections" / "kubegpu" / "scheduling").symlink_to(ROOT)
    inventory = {"all": {"hosts": {"localhost": {"ansible_connection": "local"}}}}
    inventory["all"]["hosts"]["localhost"]["ansible_python_interpreter"] = "{{ ansible_playbook_python }}"
    (work / "inventory.yml").write_text(json.dumps(inventory))
    (work / "vars.yml").write_text(json.dumps({"kubegpu_eda_act": True, "kubegpu_eda_initial": False}))
    env = dict(
        os.environ,
        K8S_AUTH_KUBECONFIG=kubeconfig,
        ANSIBLE_COLLECTIONS_PATH=str(work),
        PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    command = [str(BIN / "ansible-rulebook"), "-r", "kubegpu.scheduling.gpu_health", "-i", "inventory.yml"]
    with (work / "output.txt").open("w") as out:
        rulebook = subprocess.Popen([*command, "-e", "vars.yml", "-v"], cwd=work, env=env, stdout=out, stderr=out)
    try:
        deadline = time.monotonic() + 120
        while "watching" not in (work / "output.txt").read_text(errors="replace"):
            if time.monotonic() > deadline or rulebook.poll() is not None:
                raise SystemExit(f"ansible-rulebook did not start: {(work / 'output.txt').read_text()[-2000:]}")
            time.sleep(0.2)
        start = time.monotonic()
        patch_status(client, name, [xid(True)])
        while True:
            node = client.get(f"/api/v1/nodes/{name}")
            if node["spec"].get("unschedulable") and "kubegpu.io/quarantine-record" in node["metadata"].get(
                "annotations", {}
            ):
                return time.monotonic() - start
            if time.monotonic() - start > 120:
                raise SystemExit(f"{name} not quarantined: {(work / 'output.txt').read_text()[-3000:]}")
            time.sleep(0.1)
    finally:
        rulebook.terminate()
        rulebook.wait(20)


def unsettled(client: Any, run: str) -> int:
    """How many of the run's nodes are not Ready yet, or still carry a taint of the node lifecycle controller."""
    count = 0
    for item in client.list_items("/api/v1/nodes", label_selector=f"{RUN_LABEL}={run}", page_size=1000):
        conditions = item.get("status", {}).get("conditions", [])
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        tainted = any(t.get("key", "").startswith("node.kubernetes.io/") for t in item["spec"].get("taints", []))
        count += not ready or tainted
    return count


def report(results: dict[str, Any]) -> bool:
    rows = [
        ("source CPU while heartbeating (share of one core)", results["cpu_share"], TARGETS["cpu_share"], "<="),
        ("source resident memory at the end (MB)", results["rss_mb"], TARGETS["rss_mb"], "<="),
        ("source peak resident memory (MB)", results["peak_mb"], TARGETS["rss_mb"], "<="),
        ("events for heartbeats", results["heartbeat_events"], TARGETS["heartbeat_events"], "=="),
        ("condition written -> event (median s)", results["event_s"], TARGETS["event_s"], "<="),
        ("condition written -> event (worst s)", results["event_worst_s"], TARGETS["event_s"], "<="),
    ]
    if results.get("quarantine_s") is not None:
        rows.append(
            ("condition written -> node quarantined (s)", results["quarantine_s"], TARGETS["quarantine_s"], "<=")
        )
    print(
        f"\nGPU health event source, {results['nodes']} KWOK GPU nodes, "
        f"heartbeats every {results['period']:g} s for {results['seconds']:g} s: {results['patches']} status patches, "
        f"{results['patches_per_s']:.1f}/s"
    )
    print(f"{'measure':55} {'measured':>10} {'target':>10}  met")
    met_all = True
    for name, value, target, how in rows:
        met = value <= target if how == "<=" else value == target
        met_all &= met
        print(f"{name:55} {value:>10.3f} {target:>10.3f}  {'yes' if met else 'NO'}")
    print(json.dumps(results, sort_keys=True))
    return met_all


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--period", type=float, default=60.0, help="seconds between two heartbeats of a node")
    parser.add_argument("--seconds", type=float, default=120.0, help="how long the heartbeats are measured")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--kubeconfig", help="a cluster of your own, instead of the benchmark cluster")
    parser.add_argument("--no-rulebook", action="store_true", help="leave out the quarantine latency")
    args = parser.parse_args()

    started = args.kubeconfig is None and not bench_cluster("status").startswith("running")
    kubeconfig = args.kubeconfig or bench_cluster("up")
    client = make_client(kubeconfig)
    run = uuid.uuid4().hex[:6]
    names = [f"eda-bench-{run}-{i:05d}" for i in range(args.nodes)]
    source = None
    try:
        log(f"making {args.nodes} KWOK GPU nodes")
        run_bounded(names, lambda n: client.create("/api/v1/nodes", node_body(n, run)), args.workers)
        # Each node Ready and rid of the lifecycle controller's not-ready taint (a health signal of the table)
        # before the source lists them: what is measured after is heartbeats alone.
        settle_deadline = time.monotonic() + 600
        while waiting := unsettled(client, run):
            if time.monotonic() > settle_deadline:
                raise SystemExit(f"{waiting} of the bench's nodes did not become Ready, rid of the not-ready taint")
            log(f"{waiting} nodes not Ready yet")
            time.sleep(5)
        log("starting the source")
        source = Source(kubeconfig)
        source.wait(lambda e: e.get("status") == "watching", 0, 300, "the source watching")
        ours = set(names)

        log(f"heartbeats every {args.period:g} s for {args.seconds:g} s")
        cpu_before, t_before = source.cpu_seconds(), time.monotonic()
        mark = time.monotonic()
        patches = heartbeats(client, names, args.period, args.seconds, args.workers)
        time.sleep(2)  # the last heartbeats reach the source
        cpu_after, t_after = source.cpu_seconds(), time.monotonic()
        rss, peak = source.memory_mb()
        with source.lock:
            beat_events = [e for t, e in source.events if t >= mark and e.get("node") in ours]

        log(f"event latency, {args.rounds} rounds")
        latencies = []
        for index in range(args.rounds):
            name = names[index * max(1, len(names) // max(1, args.rounds)) % len(names)]
            start = time.monotonic()
            patch_status(client, name, [xid(True)])
            seen = source.wait(lambda e, n=name: e.get("node") == n and e.get("to") == "failed", start, 30, name)
            latencies.append(seen - start)
            start = time.monotonic()
            patch_status(client, name, [xid(False)])
            source.wait(lambda e, n=name: e.get("node") == n and e.get("to") == "healthy", start, 30, name)
        source.stop()
        quarantine = None if args.no_rulebook else quarantine_latency(kubeconfig, client, names[-1])
        met = report(
            {
                "nodes": args.nodes,
                "period": args.period,
                "seconds": args.seconds,
                "patches": patches,
                "patches_per_s": patches / (t_after - t_before),
                "cpu_share": round((cpu_after - cpu_before) / (t_after - t_before), 4),
                "rss_mb": round(rss, 1),
                "peak_mb": round(peak, 1),
                "heartbeat_events": len(beat_events),
                "event_s": round(statistics.median(latencies), 3),
                "event_worst_s": round(max(latencies), 3),
                "quarantine_s": None if quarantine is None else round(quarantine, 2),
            }
        )
        return 0 if met else 1
    finally:
        if source is not None and source.process.poll() is None:
            source.stop()
        log("deleting the bench's nodes")
        run_bounded(names, lambda n: client.delete(f"/api/v1/nodes/{n}"), args.workers)
        if started:
            bench_cluster("down")


if __name__ == "__main__":
    sys.exit(main())
