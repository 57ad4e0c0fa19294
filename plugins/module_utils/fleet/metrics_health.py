# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The health view's judgement of the DCGM exporter's metrics (what fleet/prometheus_reads.py
read), node by node. Pure.

A GPU node is judged by its series, found by the first of the node labels that names it: the
signals of gpu/dcgm_signals.py (an XID by the XID table, workload XIDs kept apart and never a
problem), and the GPUs it reports against the GPUs it should have. A node the metrics cannot
judge (the read failed, no series name it, its scrape target is down, its newest sample is too
old) is unknown, never healthy.
"""

from __future__ import annotations

import datetime
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.prometheus_reads import (
    Q_AGE,
    Q_COLLECTED,
    Q_DOWN,
    Q_GPUS,
    Q_SIGNALS,
    MetricsRead,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dcgm_promql import SIGNAL_LABEL, SIGNALS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dcgm_signals import (
    GPU_LABEL,
    GPU_METRICS_UNKNOWN,
    GPU_XID_ERROR,
    GPUS_MISSING_FROM_METRICS,
    METRIC_SIGNALS,
    PRESENCE_METRIC,
    UUID_LABEL,
    WORKLOAD,
    XID_COUNT_SIGNAL,
    XID_LABEL,
    MetricSignal,
    xid_class,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.health import HealthProblem
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.health_table import DEGRADED, UNKNOWN

_SIGNAL_OF = {signal.metric: signal for signal in SIGNALS}


@dataclass
class NodeSeries:
    """What the queries said of one node: GPUs reported, the age of its oldest newest sample,
    whether a scrape target of the exporter for it is down, and its bad series."""

    gpus: int | None = None
    age: float | None = None
    down: bool = False
    bad: list[Mapping[str, Any]] = field(default_factory=list)


def node_of(labels: Mapping[str, str], node_labels: Sequence[str]) -> str | None:
    """The node a series names: the first of the node labels it carries, not empty."""
    return next((labels[key] for key in node_labels if labels.get(key)), None)


def by_node(read: MetricsRead) -> dict[str, NodeSeries]:
    """The read's series, node by node (series that name no node are left out)."""
    nodes: dict[str, NodeSeries] = defaultdict(NodeSeries)

    def of(query: str):
        for series in read.series.get(query, ()):
            name = node_of(series["metric"], read.source.node_labels)
            if name:
                yield nodes[name], series

    for view, series in of(Q_GPUS):
        view.gpus = int(series["value"])
    for view, series in of(Q_AGE):
        view.age = series["value"]
    for view, _series in of(Q_DOWN):
        view.down = True
    for view, series in of(Q_SIGNALS):
        view.bad.append(series)
    return dict(nodes)


def _at(read: MetricsRead) -> str:
    moment = datetime.datetime.fromtimestamp(read.at, tz=datetime.UTC)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else round(value, 3)


def _series_fields(series: Mapping[str, Any], signal: MetricSignal, read: MetricsRead) -> dict[str, Any]:
    labels = series["metric"]
    return {
        "metric": signal.metric,
        "value": _number(series["value"]),
        "gpu": labels.get(GPU_LABEL, "?"),
        "uuid": labels.get(UUID_LABEL) or labels.get(UUID_LABEL.lower()) or "no UUID label",
        "at": _at(read),
        "window": read.source.window,
    }


def _xid(series: Mapping[str, Any], signal: MetricSignal) -> int:
    """The XID a series says: the last-XID gauge's value, or the windowed count's xid label."""
    if signal is XID_COUNT_SIGNAL:
        return int(series["metric"].get(XID_LABEL) or 0)
    return int(series["value"])


def signal_problems(
    bad: Sequence[Mapping[str, Any]], read: MetricsRead
) -> tuple[list[HealthProblem], list[dict[str, Any]]]:
    """The node's bad series as health problems, and its workload XIDs (never a problem) apart."""
    problems: list[HealthProblem] = []
    workload: list[dict[str, Any]] = []
    for series in bad:
        signal = _SIGNAL_OF.get(series["metric"].get(SIGNAL_LABEL, ""))
        if signal is None:
            continue
        fields = _series_fields(series, signal, read)
        status = signal.status
        if signal.kind == GPU_XID_ERROR:
            row = xid_class(_xid(series, signal))
            fields.update(xid=row.code, meaning=row.meaning)
            if row.status == WORKLOAD:
                workload.append({k: fields[k] for k in ("gpu", "uuid", "xid", "meaning", "metric")})
                continue
            status = row.status
        problems.append(HealthProblem(signal.kind, status or DEGRADED, fields))
    return problems, workload


def _unknown_reason(name: str, view: NodeSeries | None, read: MetricsRead) -> str | None:
    source = read.source
    if read.error:
        return read.error
    if view is not None and view.down:
        return f'a scrape target of the exporter for the node is down (up{{job=~"{source.job}"}} == 0)'
    if view is None or view.gpus is None:
        labels = ", ".join(source.node_labels)
        return f"no {PRESENCE_METRIC} series name {name} by any of the labels {labels} in Prometheus at {source.url}"
    if view.age is not None and view.age > source.stale_after:
        return f"its newest {PRESENCE_METRIC} sample is {view.age:.0f} s old, above prometheus.stale_after {source.stale_after} s"
    return None


def node_metrics_health(
    name: str, expected: tuple[int, str] | None, view: NodeSeries | None, read: MetricsRead
) -> tuple[list[HealthProblem], dict[str, Any]]:
    """A GPU node's health problems from the metrics, and what the metrics said of it (``metrics``
    of its health): GPUs reported, the age of its samples, workload XIDs, why it is unknown."""
    problems, workload = signal_problems(view.bad if view else (), read)
    unknown = _unknown_reason(name, view, read)
    if unknown:
        problems.append(HealthProblem(GPU_METRICS_UNKNOWN, UNKNOWN, {"reason": unknown}))
    elif view is not None and view.gpus is not None and expected is not None and view.gpus < expected[0]:
        fields = {"in_metrics": view.gpus, "expected": expected[0], "expected_source": expected[1]}
        problems.append(HealthProblem(GPUS_MISSING_FROM_METRICS, DEGRADED, {**fields, "metric": PRESENCE_METRIC}))
    said = {
        "gpus": view.gpus if view else None,
        "sample_age_seconds": round(view.age, 1) if view and view.age is not None else None,
        "workload_xids": workload,
        "unknown": unknown,
    }
    return problems, said


def not_collected(read: MetricsRead) -> list[MetricSignal]:
    """The signals whose metric has no series at all while the exporter is up (its presence metric
    has series): the exporter does not collect them. Nothing when the read failed or no exporter
    series reached Prometheus at all."""
    if read.error:
        return []
    collected = {series["metric"].get("__name__") for series in read.series.get(Q_COLLECTED, ())}
    if PRESENCE_METRIC not in collected:
        return []
    return [signal for signal in METRIC_SIGNALS if signal.metric not in collected]


def down_targets(read: MetricsRead, gpu_nodes: set[str]) -> list[str]:
    """The exporter's scrape targets that are down and name no GPU node of the facts (by instance)."""
    texts = []
    for series in read.series.get(Q_DOWN, ()):
        labels = series["metric"]
        if node_of(labels, read.source.node_labels) not in gpu_nodes:
            texts.append(f"{labels.get('job', '?')} {labels.get('instance', '?')}")
    return sorted(texts)
