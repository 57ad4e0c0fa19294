# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""PromQL for the DCGM exporter's health signals (gpu/dcgm_signals.py), written once for both
readers: the health view's instant queries over the whole fleet and the alert rules. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dcgm_signals import (
    CHANGED,
    GPU_LABEL,
    INCREASED,
    METRIC_SIGNALS,
    MODEL_LABEL,
    NODE_LABELS,
    PRESENCE_METRIC,
    SET,
    UUID_LABEL,
    XID_COUNT_SIGNAL,
    MetricSignal,
)

# Every signal the health view reads, in the order its problems are said.
SIGNALS = (*METRIC_SIGNALS, XID_COUNT_SIGNAL)
# The label each bad series carries in the signals query, naming the signal's metric.
SIGNAL_LABEL = "kubegpu_signal"
# The series the recording rules of gpu_alert_rules keep for the facts' read (prometheus.recorded), each
# with the window its signals were read in: the signals' bad GPUs, the GPUs per node, the sample ages.
RECORDED_SIGNALS = "kubegpu:dcgm_gpu_signals:bad"
RECORDED_GPUS = "kubegpu:dcgm_gpus:count_by_node"
RECORDED_AGE = "kubegpu:dcgm_sample_age_seconds:max_by_node"
WINDOW_LABEL = "kubegpu_window"
RECORDS_GROUP = "kubegpu-gpu-facts"

# The labels that name one GPU on the exporter's series (UUID, or uuid where the exporter is told so), and its model.
GPU_IDENTITY = (GPU_LABEL, UUID_LABEL, UUID_LABEL.lower(), MODEL_LABEL)


def by(labels: Sequence[str] = NODE_LABELS) -> str:
    """The grouping that keeps a series' node: every label that may name it (absent ones group as empty)."""
    return ", ".join(labels)


def per_gpu(signal: MetricSignal, labels: Sequence[str] = NODE_LABELS, offset: str = "", where: str = "") -> str:
    """The signal's metric, one series per GPU (and per label the signal keeps, such as the windowed
    XID count's ``xid``), now or ``offset`` ago, of the series whose value passes ``where`` (``!= 0``,
    say). The exporter's other labels change while the GPU stays: the last-XID gauge carries the XID's
    ``err_code`` and ``err_msg`` since its release 3.3.6-3.4.2, and the pod mapping the ``pod``
    holding the GPU, so each new XID or pod starts a new series and the old one goes stale. Read per
    series, no XID would ever be seen to change. The filter goes before the grouping: on a healthy
    fleet it leaves a handful of series to group instead of every GPU's."""
    at = f" offset {offset}" if offset else ""
    kept = f" {where}" if where else ""
    return f"max by ({by(gpu_labels(signal, labels))}) ({signal.metric}{at}{kept})"


def gpu_labels(signal: MetricSignal, labels: Sequence[str] = NODE_LABELS) -> tuple[str, ...]:
    """The labels that name one GPU's reading of ``signal``: its node, its identity, what the signal keeps."""
    return (*labels, *GPU_IDENTITY, *signal.keep)


def value_in(expr: str, codes: Iterable[int]) -> str:
    """The series of ``expr`` whose value is one of ``codes``."""
    return " or ".join(f"{expr} == {code}" for code in codes)


def signal_expr(
    signal: MetricSignal, window: str, codes: Iterable[int] | None = None, labels: Sequence[str] = NODE_LABELS
) -> str:
    """The GPUs whose signal says they are bad now, read as the signal says: for the last-XID gauge,
    a value that is not 0 (optionally only ``codes``) and not the GPU's value ``window`` ago (0 for a
    GPU Prometheus has no series of then: a node that joined since and failed is seen; the price is
    an old XID read as new for one window after Prometheus lost its data); for a counter, a value
    above the GPU's value ``window`` ago (the increase its value) (none then: not judged, since counters such as
    remapped rows carry the GPU's whole life and would all read as new); for a flag, a value above 0
    (optionally only ``codes``). Two instant selections per signal, each filtered before it is
    grouped per GPU, so that only a counter's past reading groups every GPU: a subquery over the
    window would evaluate every GPU's series at every step, ten times and more the work at thousands
    of nodes."""
    match = f"on ({by(gpu_labels(signal, labels))})"
    if signal.reading == CHANGED:
        now = per_gpu(signal, labels, where="!= 0")
        current = f"({value_in(now, codes)})" if codes is not None else now
        same_before = f"{now} == {match} {per_gpu(signal, labels, offset=window, where='!= 0')}"
        return f"{current} unless {match} ({same_before})"
    if signal.reading == INCREASED:
        return f"{per_gpu(signal, labels, where='> 0')} - {match} {per_gpu(signal, labels, offset=window)} > 0"
    if signal.reading == SET:
        now = per_gpu(signal, labels, where="> 0")
        return f"({value_in(now, codes)})" if codes is not None else now
    raise ValueError(f"unknown reading {signal.reading!r} of {signal.metric}")


def gpu_count_expr(labels: Sequence[str] = NODE_LABELS) -> str:
    """Per node, the GPUs the exporter reports now (each GPU UUID once, whatever its MIG instances)."""
    return f"count by ({by(labels)}) (count by ({by(labels)}, {UUID_LABEL}) ({PRESENCE_METRIC}))"


def sample_age_expr(labels: Sequence[str] = NODE_LABELS) -> str:
    """Per node, the seconds since the oldest of its GPUs' newest samples: a GPU's series that stopped
    being scraped ages until Prometheus marks it stale."""
    return f"max by ({by(labels)}) (time() - timestamp({PRESENCE_METRIC}))"


def collected_selector(metrics: Iterable[str]) -> str:
    """The series of every metric of ``metrics``: their names are what the exporter collects."""
    return f'{{__name__=~"{"|".join(metrics)}"}}'


def targets_down_expr(job_pattern: str) -> str:
    """The exporter's scrape targets whose last scrape failed."""
    return f'up{{job=~"{job_pattern}"}} == 0'


def changed_outside_expr(
    signal: MetricSignal, window: str, codes: Iterable[int], labels: Sequence[str] = NODE_LABELS
) -> str:
    """For the last-XID gauge, the GPUs whose value is new within ``window`` (as signal_expr reads it)
    and is neither 0 nor one of ``codes``: an XID that no row of the table names."""
    if signal.reading != CHANGED:
        raise ValueError(f"{signal.metric} is not read by its changes")
    now = per_gpu(signal, labels, where="!= 0")
    outside = " and ".join(f"{now} != {code}" for code in codes)
    return f"({outside}) and ({signal_expr(signal, window, labels=labels)})"


def signals_expr(window: str, labels: Sequence[str] = NODE_LABELS) -> str:
    """The bad GPUs of every signal at once, each series tagged with its signal's metric in SIGNAL_LABEL."""
    return " or ".join(
        f'label_replace({signal_expr(signal, window, labels=labels)}, "{SIGNAL_LABEL}", "{signal.metric}", "", "")'
        for signal in SIGNALS
    )


def recording_rules(window: str, labels: Sequence[str] = NODE_LABELS) -> list[dict[str, object]]:
    """Prometheus recording rules that keep, at every evaluation, what the facts' read would ask:
    the signals' bad GPUs, the GPUs per node and the age of their samples. Reading these costs a few
    thousand series where the signals query reads every GPU's sample of every metric."""
    kept = {WINDOW_LABEL: window}
    return [
        {"record": RECORDED_SIGNALS, "expr": signals_expr(window, labels), "labels": kept},
        {"record": RECORDED_GPUS, "expr": gpu_count_expr(labels), "labels": kept},
        {"record": RECORDED_AGE, "expr": sample_age_expr(labels), "labels": kept},
    ]


def recording_group(window: str, labels: Sequence[str] = NODE_LABELS) -> dict[str, object]:
    """The recording rules as the group of a Prometheus rules file."""
    return {"name": RECORDS_GROUP, "rules": recording_rules(window, labels)}


def recorded(record: str, window: str) -> str:
    """The series a recording rule kept for ``window``."""
    return f'{record}{{{WINDOW_LABEL}="{window}"}}'


def recorded_age_expr(window: str) -> str:
    """The sample ages as recorded, grown by the time since the rule's evaluation recorded them."""
    kept = recorded(RECORDED_AGE, window)
    return f"{kept} + (time() - timestamp({kept}))"


def with_node_label(expr: str, target: str = "node", labels: Sequence[str] = NODE_LABELS) -> str:
    """``expr`` with the label ``target`` set to the node's name: from the first label of ``labels``
    that the series has (not empty), the ones before overriding the ones after."""
    for label in reversed(labels):
        if label != target:
            expr = f'label_replace({expr}, "{target}", "$1", "{label}", "(.+)")'
    return expr
