# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prometheus alert rules for GPU faults, rendered from the collection's one table of the DCGM
exporter's health signals (gpu/dcgm_signals.py) and its PromQL (gpu/dcgm_promql.py). Pure.

Two groups, two tiers users route on:

- ``page`` (``severity: critical``): what leaves a node failed: an XID of the table's failed
  class, an uncorrectable ECC error, a row remap failure, a GPU gone from the exporter, and the
  exporter absent on a node that has GPUs.
- ``ticket`` (``severity: warning``): what leaves it degraded: an XID of the degraded class or one
  the table does not list, rows pending remap, pages pending retirement, rows remapped for
  uncorrectable errors.

An XID of the workload class never alerts. Every alert carries ``node`` (the node's name from
whichever label the exporter or the scrape config gives it), ``kind`` (the health problem kind the
health view and the event source emit), ``status``, ``tier`` and ``severity``, and a runbook URL.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu import dcgm_promql as promql
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dcgm_signals import (
    CHANGED,
    GPU_METRICS_UNKNOWN,
    GPUS_MISSING_FROM_METRICS,
    INCREASED,
    METRIC_SIGNALS,
    PRESENCE_METRIC,
    XID_TABLE,
    MetricSignal,
    xid_class,
    xids_of,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.health_table import DEGRADED, FAILED, UNKNOWN
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import NVIDIA_GPU
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError

PAGE, TICKET = "page", "ticket"
TIERS = {PAGE: "critical", TICKET: "warning"}
TIER_OF_STATUS = {FAILED: PAGE, DEGRADED: TICKET, UNKNOWN: PAGE}
GROUP_NAMES = {PAGE: "kubegpu-gpu-page", TICKET: "kubegpu-gpu-ticket"}
NODE = "node"
UNLISTED = "unlisted"
# The collection's repository (galaxy.yml) and its runbook pages.
REPOSITORY = "https://github.com/kubegpu/scheduling"
DEFAULT_RUNBOOK_BASE_URL = f"{REPOSITORY}/blob/main/docs/runbooks"
RUNBOOK_PAGE = "gpu-failure.md"
# kube-state-metrics writes an extended resource's name with `.` and `/` as `_`.
CAPACITY_METRIC = "kube_node_status_capacity"
CAPACITY_RESOURCE = re.sub(r"[./]", "_", NVIDIA_GPU)
GPU_COUNT_DROPPED = "GpuCountDropped"
EXPORTER_ABSENT = "GpuExporterAbsent"
# Prometheus' durations, as its rule files and the PrometheusRule schema take them.
_DURATION = re.compile(r"^(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?(?:(\d+)ms)?$")
_UNIT_MS = (365 * 86400_000, 7 * 86400_000, 86400_000, 3600_000, 60_000, 1000, 1)


@dataclass(frozen=True)
class AlertSettings:
    """The options of the rules: the window an XID change or a counter increase is looked for in,
    how long each tier's condition must hold (``absent_for`` for a missing exporter, which restarts
    take a while to end), how far back a node's GPU count is compared, and the runbooks' base URL."""

    window: str = "30m"
    page_for: str = "2m"
    ticket_for: str = "15m"
    absent_for: str = "10m"
    count_lookback: str = "1h"
    runbook_base_url: str = DEFAULT_RUNBOOK_BASE_URL
    # The window of the recording rules kept for the facts' read (prometheus.recorded); None: none.
    record_window: str | None = None


def duration_ms(text: str, option: str) -> int:
    """A Prometheus duration in milliseconds; an OptionError naming the option when it is not one."""
    match = _DURATION.match(text or "")
    if not text or not match or not any(match.groups()):
        raise OptionError(f"{option} must be a Prometheus duration such as 90s, 15m or 1h30m, not {text!r}")
    return sum(int(part) * unit for part, unit in zip(match.groups(), _UNIT_MS, strict=True) if part)


def check_settings(settings: AlertSettings) -> None:
    """Each duration valid, and the window longer than every `for` of a rule that reads a change in
    it: an XID or an increase is seen for `window` only, so a longer `for` would never fire."""
    values = {name: getattr(settings, name) for name in ("window", "page_for", "ticket_for", "absent_for")}
    ms = {
        name: duration_ms(value, name) for name, value in {**values, "count_lookback": settings.count_lookback}.items()
    }
    for name in ("page_for", "ticket_for"):
        if ms["window"] <= ms[name]:
            raise OptionError(
                f"window ({settings.window}) must be longer than {name} ({values[name]}): an XID or a counter "
                "increase stays in the window that long only, and the alert would never fire"
            )
    if settings.record_window is not None:
        duration_ms(settings.record_window, "record_window")
    if ms["count_lookback"] <= ms["page_for"]:
        raise OptionError(
            f"count_lookback ({settings.count_lookback}) must be longer than page_for ({settings.page_for})"
        )


def per_gpu(expr: str) -> str:
    """Per GPU of a node, named by the ``node`` label, whatever label the series gave the node."""
    return f"max by ({NODE}, {promql.by(promql.GPU_IDENTITY)}) ({promql.with_node_label(expr)})"


def per_node(expr: str, aggregation: str = "max") -> str:
    return f"{aggregation} by ({NODE}) ({promql.with_node_label(expr)})"


def camel(text: str) -> str:
    return "".join(part.capitalize() for part in text.lower().split("_"))


def alert_name(signal: MetricSignal, xid_status: str | None = None) -> str:
    """`Gpu` and the metric's name without DCGM's prefix (`Increased` for a counter), or for the
    last-XID gauge the XID class: GpuXidFailed, GpuEccDbeVolTotalIncreased, GpuRowRemapFailure."""
    if xid_status is not None:
        return f"GpuXid{camel(xid_status)}"
    name = "Gpu" + camel(signal.metric.removeprefix("DCGM_FI_DEV_"))
    return name + ("Increased" if signal.reading == INCREASED else "")


def codes_text(status: str) -> str:
    return ", ".join(f"{code} ({xid_class(code).meaning})" for code in xids_of(status))


def reading_text(signal: MetricSignal, window: str) -> str:
    if signal.reading == CHANGED:
        return f"{signal.metric} is {{{{ $value }}}}, changed within the last {window}"
    if signal.reading == INCREASED:
        return f"{signal.metric} grew by {{{{ $value | humanize }}}} within the last {window}"
    return f"{signal.metric} is {{{{ $value }}}}"


ON_GPU = "GPU {{ $labels.gpu }} ({{ $labels.UUID }}, {{ $labels.modelName }}) of node {{ $labels.node }}"


def rule(
    settings: AlertSettings, name: str, expr: str, status: str, kind: str, text: tuple[str, str]
) -> dict[str, Any]:
    """One alerting rule of the tier its status gives, with its labels, annotations and runbook."""
    tier = TIER_OF_STATUS[status]
    duration = settings.absent_for if kind == GPU_METRICS_UNKNOWN else getattr(settings, f"{tier}_for")
    summary, description = text
    return {
        "alert": name,
        "expr": expr,
        "for": duration,
        "labels": {"severity": TIERS[tier], "tier": tier, "status": status, "kind": kind},
        "annotations": {
            "summary": summary,
            "description": description,
            "runbook_url": f"{settings.runbook_base_url.rstrip('/')}/{RUNBOOK_PAGE}",
        },
    }


def xid_rules(settings: AlertSettings, signal: MetricSignal) -> list[dict[str, Any]]:
    """The last-XID gauge by the table's classes: failed pages, degraded and unlisted open a ticket;
    the workload class is in no rule."""
    window, rules = settings.window, []
    for status in (FAILED, DEGRADED):
        expr = per_gpu(promql.signal_expr(signal, window, xids_of(status)))
        summary = f"XID {{{{ $value }}}} ({status} class) on GPU {{{{ $labels.gpu }}}} of {{{{ $labels.node }}}}"
        description = f"{reading_text(signal, window)} on {ON_GPU}. XIDs of the {status} class: {codes_text(status)}."
        rules.append(rule(settings, alert_name(signal, status), expr, status, signal.kind, (summary, description)))
    expr = per_gpu(promql.changed_outside_expr(signal, window, sorted(XID_TABLE)))
    summary = "XID {{ $value }} (not in the collection's XID table) on GPU {{ $labels.gpu }} of {{ $labels.node }}"
    description = (
        f"{reading_text(signal, window)} on {ON_GPU}: an XID the collection's table does not class; "
        "look it up in NVIDIA's XID catalogue (https://docs.nvidia.com/deploy/xid-errors/index.html)."
    )
    rules.append(rule(settings, alert_name(signal, UNLISTED), expr, DEGRADED, signal.kind, (summary, description)))
    return rules


def signal_rules(settings: AlertSettings) -> list[dict[str, Any]]:
    """A rule per row of the signal table, the XID gauge one per class."""
    rules = []
    for signal in METRIC_SIGNALS:
        if signal.status is None:
            rules += xid_rules(settings, signal)
            continue
        expr = per_gpu(promql.signal_expr(signal, settings.window))
        summary = f"{signal.metric} on GPU {{{{ $labels.gpu }}}} of {{{{ $labels.node }}}}: {{{{ $value }}}}"
        description = f"{reading_text(signal, settings.window)} on {ON_GPU}."
        rules.append(rule(settings, alert_name(signal), expr, signal.status, signal.kind, (summary, description)))
    return rules


def gpu_count_rule(settings: AlertSettings) -> dict[str, Any]:
    """Fewer GPUs in the exporter now than at any time within the lookback, per node. The exporter is
    compared with itself, not with kube-state-metrics: allocatable drops with the GPUs withdrawn
    (NVIDIA/dcgm-exporter#348) and capacity follows the device plugin's view, neither of which
    says how many GPUs the exporter saw."""
    now = per_node(promql.gpu_count_expr())
    expr = f"{now} < max_over_time(({now})[{settings.count_lookback}:1m])"
    summary = "Node {{ $labels.node }} has {{ $value }} GPUs in the DCGM exporter, fewer than before"
    description = (
        f"{PRESENCE_METRIC} covers {{{{ $value }}}} GPUs (by UUID) of node {{{{ $labels.node }}}} now, fewer than "
        f"within the last {settings.count_lookback}: a GPU fell off the bus or its driver lost it."
    )
    return rule(settings, GPU_COUNT_DROPPED, expr, FAILED, GPUS_MISSING_FROM_METRICS, (summary, description))


def exporter_absent_rule(settings: AlertSettings) -> dict[str, Any]:
    """A node with GPU capacity (kube-state-metrics) and no series of the exporter: silent on a
    cluster without GPU nodes, and where kube-state-metrics is not scraped."""
    capacity = f'max by ({NODE}) ({CAPACITY_METRIC}{{resource="{CAPACITY_RESOURCE}"}}) > 0'
    expr = f"({capacity}) unless on ({NODE}) ({per_node(PRESENCE_METRIC, 'count')})"
    summary = "No DCGM exporter metrics from GPU node {{ $labels.node }}"
    description = (
        f"Node {{{{ $labels.node }}}} has {{{{ $value }}}} {NVIDIA_GPU} in its capacity ({CAPACITY_METRIC}) and no "
        f"{PRESENCE_METRIC} series: the exporter does not run there, or its scrapes fail. Its GPUs' health is unknown."
    )
    return rule(settings, EXPORTER_ABSENT, expr, UNKNOWN, GPU_METRICS_UNKNOWN, (summary, description))


def rule_groups(settings: AlertSettings) -> list[dict[str, Any]]:
    """The page group, then the ticket group, each rule in the table's order; with a record window, the
    recording rules the facts' read takes then (prometheus.recorded)."""
    check_settings(settings)
    rules = [*signal_rules(settings), gpu_count_rule(settings), exporter_absent_rule(settings)]
    groups = [
        {"name": GROUP_NAMES[tier], "rules": [r for r in rules if r["labels"]["tier"] == tier]}
        for tier in (PAGE, TICKET)
    ]
    if settings.record_window is not None:
        groups.append(promql.recording_group(settings.record_window))
    return groups


def rules_file(settings: AlertSettings) -> dict[str, Any]:
    """A Prometheus rules file."""
    return {"groups": rule_groups(settings)}


def prometheus_rule(settings: AlertSettings, name: str, namespace: str, labels: Mapping[str, str]) -> dict[str, Any]:
    """The rules as a Prometheus Operator PrometheusRule; `labels` are those its ruleSelector needs."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": rules_file(settings),
    }


def alert_names(groups: list[dict[str, Any]]) -> list[str]:
    return [r["alert"] for group in groups for r in group["rules"] if "alert" in r]
