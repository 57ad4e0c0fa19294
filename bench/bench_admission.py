# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pod creates with and without the admission policies bound in Deny: the added time per request.

In a temporary namespace, small good pods (one CPU-only container, which both policies admit) are
created one request after another over one kept-alive connection (the module's KubeClient),
alternating rounds without and with the policies: `gpu_admission_policy`'s own objects
(`admission_objects`, both policies in Deny, the default exemptions) applied and removed by its own
functions (`reads.apply_object`, `reads.delete_object`). Before a round with the policies, a
dry-run create of a bypass pod must be refused; before one without, admitted: the policies are
timed only while in force, never while the API server is still loading them. The pods name a
scheduler that does not exist, so that no scheduler work follows the creates. The namespace, the
policies and their bindings are removed at the end whatever happens.

Hold the cluster lock for the whole run:

    flock /tmp/kubegpu-cluster.lock sh -c 'KC=$(make cluster-up | tail -1) && \\
        .venv/bin/python -m bench.bench_admission --kubeconfig "$KC" [--pods 1000 --rounds 10 --json OUT]'
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import replace
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.admission import policy, reads
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient, client_from_params
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.paths import api_path

NAMESPACE = "kubegpu-bench-admission"
NO_SCHEDULER = "kubegpu-bench-none"
WITHOUT, WITH = "without the policies", "with the policies in Deny"


def settings() -> policy.AdmissionSettings:
    return policy.AdmissionSettings(
        enforcement="deny", warnings_enforcement="deny", exempt_namespaces=policy.default_exempt_namespaces()
    )


def pod(name: str, bypass: bool = False) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "main",
        "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"cpu": "10m", "memory": "16Mi"}},
    }
    if bypass:
        container["env"] = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"schedulerName": NO_SCHEDULER, "containers": [container]},
    }


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(fraction * len(ordered) + 0.5) - 1))]


def bypass_refused(client: KubeClient) -> bool:
    """Whether a dry-run create of a bypass pod is refused now."""
    try:
        client.create(api_path("v1", "pods", namespace=NAMESPACE) + "?dryRun=All", pod("probe", bypass=True))
    except ClusterError as exc:
        if exc.status in (400, 403, 422):
            return True
        raise
    return False


def wait_until(client: KubeClient, refused: bool, timeout: float = 60) -> float:
    started = time.perf_counter()
    while bypass_refused(client) != refused:
        if time.perf_counter() - started > timeout:
            raise SystemExit(f"the policies did not {'take' if refused else 'leave'} effect within {timeout:.0f}s")
        time.sleep(0.2)
    return time.perf_counter() - started


def apply_policies(client: KubeClient) -> None:
    for obj in policy.admission_objects(settings()):
        reads.apply_object(client, obj, dry_run=False)


def remove_policies(client: KubeClient) -> None:
    # As the module's state=absent: bindings before their policies, the params last.
    for obj in reversed(policy.admission_objects(replace_mutating())):
        reads.delete_object(client, obj)


def replace_mutating() -> policy.AdmissionSettings:
    """Every object the module can make, the mutating ones included."""
    return replace(settings(), mutating=True)


def create_round(client: KubeClient, prefix: str, count: int) -> list[float]:
    path = api_path("v1", "pods", namespace=NAMESPACE)
    times = []
    for index in range(count):
        started = time.perf_counter()
        client.create(path, pod(f"{prefix}-{index}"))
        times.append(time.perf_counter() - started)
    return times


def summary(times: list[float]) -> dict[str, float]:
    return {
        "requests": len(times),
        "median_ms": statistics.median(times) * 1000,
        "p95_ms": percentile(times, 0.95) * 1000,
        "mean_ms": statistics.fmean(times) * 1000,
        "total_s": sum(times),
    }


def table(results: dict[str, dict[str, float]]) -> str:
    base, policed = results[WITHOUT], results[WITH]
    lines = [
        "| Pod creates | Requests | Median (ms) | p95 (ms) | Mean (ms) | Sum of requests (s) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, row in results.items():
        lines.append(
            f"| {name} | {row['requests']:,} | {row['median_ms']:.2f} | {row['p95_ms']:.2f} | "
            f"{row['mean_ms']:.2f} | {row['total_s']:.2f} |"
        )
    lines.append(
        f"| added per request | | {policed['median_ms'] - base['median_ms']:+.2f} | "
        f"{policed['p95_ms'] - base['p95_ms']:+.2f} | {policed['mean_ms'] - base['mean_ms']:+.2f} | |"
    )
    return "\n".join(lines)


def preexisting(client: KubeClient) -> list[str]:
    """The collection's admission objects already on the cluster: the benchmark would remove them."""
    return [policy.object_key(o) for o in policy.admission_objects(replace_mutating()) if reads.read_object(client, o)]


def run(client: KubeClient, pods: int, rounds: int, log: Any) -> dict[str, Any]:
    per_round = pods // rounds
    times: dict[str, list[float]] = {WITHOUT: [], WITH: []}
    settle: list[float] = []
    for number in range(rounds):
        order = (WITHOUT, WITH) if number % 2 == 0 else (WITH, WITHOUT)
        for mode in order:
            if mode == WITH:
                apply_policies(client)
                settle.append(wait_until(client, refused=True))
            else:
                remove_policies(client)
                settle.append(wait_until(client, refused=False))
            taken = create_round(client, f"{'on' if mode == WITH else 'off'}-{number}", per_round)
            times[mode] += taken
            log(f"  [{number + 1}/{rounds}] {mode}: median {statistics.median(taken) * 1000:.2f} ms")
    return {
        "results": {mode: summary(values) for mode, values in times.items()},
        "policy_settle_s": {"median": statistics.median(settle), "max": max(settle)},
        "api_requests": client.request_count,
    }


def cleanup(client: KubeClient) -> None:
    remove_policies(client)
    client.delete(api_path("v1", "namespaces", NAMESPACE))
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            client.get(api_path("v1", "namespaces", NAMESPACE))
        except ClusterError as exc:
            if exc.status == 404:
                return
            raise
        time.sleep(1)
    print(f"warning: namespace {NAMESPACE} still terminating after 180s", file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--pods", type=int, default=1000, help="pods created in each mode (default 1000)")
    parser.add_argument("--rounds", type=int, default=10, help="alternating rounds (default 10)")
    parser.add_argument("--json", help="write the results here too")
    args = parser.parse_args()
    if args.pods < args.rounds or args.pods % args.rounds:
        parser.error("--pods must be a multiple of --rounds")

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    client = client_from_params({"kubeconfig": os.path.expanduser(args.kubeconfig)})
    reads.require_apis(client, mutating=False)
    found = preexisting(client)
    if found:
        raise SystemExit(f"the admission objects are already on the cluster ({', '.join(found)}): not touching them")
    client.create(
        api_path("v1", "namespaces"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    )
    try:
        report = run(client, args.pods, args.rounds, log)
    finally:
        cleanup(client)
    report["sequential"] = True
    report["load_average"] = os.getloadavg()
    print(table(report["results"]))
    print(
        f"\n{args.pods:,} pods each way, {args.rounds} alternating rounds of {args.pods // args.rounds}, sequential "
        f"requests on one connection; policies in force within {report['policy_settle_s']['median']:.2f} s "
        f"(median; max {report['policy_settle_s']['max']:.2f} s) of being applied or removed"
    )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
