# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""PromQL for the DCGM exporter's health signals (gpu/dcgm_signals.py), written once for both
readers: the health view's instant queries over the whole fleet and the alert rules. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dcgm_signals import (
    CHANGED,
    INCREASED,
    NODE_LABELS,
    PRESENCE_METRIC,
    SET,
    UUID_LABEL,
    MetricSignal,
)


def by(labels: Sequence[str] = NODE_LABELS) -> str:
    """The grouping that keeps a series' node: every label that may name it (absent ones group as empty)."""
    return ", ".join(labels)


def value_in(metric: str, codes: Iterable[int]) -> str:
    """The series of ``metric`` whose value is one of ``codes``."""
    return " or ".join(f"{metric} == {code}" for code in codes)


def signal_expr(signal: MetricSignal, window: str, codes: Iterable[int] | None = None) -> str:
    """The series of the signal's metric that say a GPU is bad now, read as the signal says: for the
    last-XID gauge, a value that changed within ``window`` and is not 0 (optionally only ``codes``);
    for a counter, an increase within ``window``; for a flag, a value above 0."""
    metric = signal.metric
    if signal.reading == CHANGED:
        current = f"({value_in(metric, codes)})" if codes is not None else f"{metric} != 0"
        return f"{current} and changes({metric}[{window}]) > 0"
    if signal.reading == INCREASED:
        return f"increase({metric}[{window}]) > 0"
    if signal.reading == SET:
        current = f"({value_in(metric, codes)})" if codes is not None else metric
        return f"{current} > 0" if codes is None else current
    raise ValueError(f"unknown reading {signal.reading!r} of {metric}")


def gpu_count_expr(labels: Sequence[str] = NODE_LABELS) -> str:
    """Per node, the GPUs the exporter reports now (each GPU UUID once, whatever its MIG instances)."""
    return f"count by ({by(labels)}) (count by ({by(labels)}, {UUID_LABEL}) ({PRESENCE_METRIC}))"


def sample_age_expr(labels: Sequence[str] = NODE_LABELS) -> str:
    """Per node, the seconds since the oldest of its GPUs' newest samples: a GPU's series that stopped
    being scraped ages until Prometheus marks it stale."""
    return f"max by ({by(labels)}) (time() - timestamp({PRESENCE_METRIC}))"


def collected_expr(metrics: Iterable[str]) -> str:
    """One series per metric of ``metrics`` that has any series at all: what the exporter collects."""
    return f'count by (__name__) ({{__name__=~"{"|".join(metrics)}"}})'


def targets_down_expr(job_pattern: str) -> str:
    """The exporter's scrape targets whose last scrape failed."""
    return f'up{{job=~"{job_pattern}"}} == 0'


def changed_outside_expr(signal: MetricSignal, window: str, codes: Iterable[int]) -> str:
    """For the last-XID gauge, the series whose value changed within ``window`` and is neither 0 nor
    one of ``codes``: an XID that no row of the table names."""
    if signal.reading != CHANGED:
        raise ValueError(f"{signal.metric} is not read by its changes")
    metric = signal.metric
    current = " and ".join([f"{metric} != 0", *(f"{metric} != {code}" for code in codes)])
    return f"({current}) and changes({metric}[{window}]) > 0"


def with_node_label(expr: str, target: str = "node", labels: Sequence[str] = NODE_LABELS) -> str:
    """``expr`` with the label ``target`` set to the node's name: from the first label of ``labels``
    that the series has (not empty), the ones before overriding the ones after."""
    for label in reversed(labels):
        if label != target:
            expr = f'label_replace({expr}, "{target}", "$1", "{label}", "(.+)")'
    return expr
