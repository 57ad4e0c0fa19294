# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The device-plugin check's readable report: which node, what is wrong, what to do."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.severity import ERROR, WARNING, plural
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.device_plugins import CUSTOM, DEPLOYMENTS_BY_KEY

MAX_REPORTED_PER_KIND = 10


def _daemonset_line(summary: Mapping[str, Any]) -> str:
    title = DEPLOYMENTS_BY_KEY.get(summary["deployment"], CUSTOM).title
    counts = ", ".join(f"{key} {summary[key]}" for key in ("desired", "current", "updated", "ready", "available"))
    state = "ok" if summary["healthy"] else "NOT HEALTHY"
    return (
        f"  DaemonSet {summary['namespace']}/{summary['name']} ({title}): {counts}, "
        f"misscheduled {summary['misscheduled']}: {state}"
    )


def _finding_lines(item: Mapping[str, Any]) -> list[str]:
    return [
        f"  [{item['severity'].upper()}] {item['subject']}: {item['problem']}",
        f"      what to do: {item['remedy']}",
    ]


def render_report(result: Mapping[str, Any]) -> list[str]:
    """Which node, what is wrong, what to do, as lines; errors first."""
    counts = result["counts"]
    verdict = "PASSED" if result["healthy"] else "FAILED"
    headline = (
        f"GPU device plugin check {verdict}: {plural(counts[ERROR], 'error')}, {plural(counts[WARNING], 'warning')} "
        f"({plural(counts['gpu_nodes'], 'GPU node')}, {plural(counts['daemonsets'], 'DaemonSet')}, "
        f"{plural(counts['plugin_pods'], 'plugin pod')})"
    )
    lines = [headline]
    deployments = result["deployments"]
    lines.append("Deployment: " + ("; ".join(d["title"] for d in deployments) if deployments else "none found"))
    lines += [_daemonset_line(s) for s in (*result["daemonsets"], *result.get("dra_daemonsets", ()))]
    dra_nodes = counts.get("dra_nodes", 0)
    if dra_nodes:
        lines.append(
            f"GPUs through DRA: {plural(dra_nodes, 'node')}, {plural(counts['dra_plugin_pods'], 'kubelet-plugin pod')}"
        )
    healthy_nodes = [n["name"] for n in result["nodes"] if not n["problems"]]
    if healthy_nodes:
        lines.append(f"Nodes without findings ({len(healthy_nodes)}): {', '.join(healthy_nodes)}")
    if not result["findings"]:
        return lines
    lines.append("Findings:")
    shown: dict[str, int] = defaultdict(int)
    hidden: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for item in result["findings"]:
        key = f"{item['severity']}:{item['kind']}"
        if shown[key] < MAX_REPORTED_PER_KIND:
            shown[key] += 1
            lines += _finding_lines(item)
        else:
            hidden[key].append(item)
    for items in hidden.values():
        names = ", ".join(str(i["node"] or i["subject"]) for i in items)
        lines.append(f'  ... and {len(items)} more with "{items[0]["problem"]}" or alike: {names}')
    return lines
