# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU's own health signals in the DCGM exporter's metrics, as data: which metric says what,
how it must be read, the status it gives a node, and the XID codes by what they mean.

One table for everything that reads the exporter: the health view's Prometheus queries
(metrics/queries.py) and the alert rules rendered for Prometheus (alert_rules/). Each row keeps
its source. The traps the rows are written against:

- ``DCGM_FI_DEV_XID_ERRORS`` is the value of the last XID seen and never resets
  (NVIDIA/dcgm-exporter#500, NVIDIA/DCGM#277): it is judged by a change within the window, never
  by its value, so an XID from last month does not alarm forever; and since the exporter labels
  each XID's series with its code (``err_code``), a change is looked for per GPU, not per series
  (gpu/dcgm_promql.py per_gpu).
- ECC totals and retired pages are commented out of the exporter's default counters
  (dcgm-exporter#666): a metric without series while the exporter is up is "not collected", and
  each row carries the counters-CSV line that turns it on.
"""

from __future__ import annotations

from dataclasses import dataclass

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.health_table import DEGRADED, FAILED

# The exporter's default counters at its release 4.5.3-4.8.2 (the file every other row's default_on
# was read from); HEAD moved the GPU's host label from Hostname to hostname (#655).
EXPORTER_COUNTERS = (
    "https://github.com/NVIDIA/dcgm-exporter/blob/691c92762eb551313c825f6efe4ceeee20982801/etc/default-counters.csv"
)
# DCGM's field ids and their meaning: dcgmlib/dcgm_fields.h.
DCGM_FIELDS = "https://github.com/NVIDIA/DCGM/blob/28bfbd4c97413d4aec249cdd9543a67d24f95b78/dcgmlib/dcgm_fields.h"
# The XIDs NVIDIA's device plugin skips as application errors ("the GPU should still be healthy").
DEVICE_PLUGIN_XIDS = (
    "https://github.com/NVIDIA/k8s-device-plugin/blob/a9e8bafe61c59ac43521fd83226e1bb946f30014/internal/rm/health.go"
)
# The XIDs GKE's GPU health checker sets XidCriticalError for (monitorCriticalXid).
GKE_CRITICAL_XIDS = (
    "https://github.com/GoogleCloudPlatform/container-engine-accelerators/blob/"
    "06e703e61de4fb218ea37fa3c4d00dde656fa98c/pkg/gpu/nvidia/health_check/health_checker.go"
)
XID_CATALOGUE = "https://docs.nvidia.com/deploy/xid-errors/index.html"

# The labels that name the GPU's node on the exporter's series, tried in this order: the exporter's
# own (Hostname until 4.5.x, hostname after #655), then those scrape configs add from the target
# (kubernetes_node from the classic kubernetes_sd relabelling, node from kube-prometheus-stack's).
NODE_LABELS = ("Hostname", "hostname", "kubernetes_node", "node")
# Per GPU, on by default in every exporter release and in the GPU Operator's: the series that says a
# GPU is there and when the exporter last saw it.
PRESENCE_METRIC = "DCGM_FI_DEV_GPU_TEMP"
GPU_LABEL = "gpu"
UUID_LABEL = "UUID"
MODEL_LABEL = "modelName"
XID_LABEL = "xid"

WORKLOAD = "workload"
XID_CLASSES = (FAILED, DEGRADED, WORKLOAD)


@dataclass(frozen=True)
class XidClass:
    """An XID code: ``failed`` or ``degraded`` (the GPU's hardware or firmware), or ``workload``
    (raised by what a program did; the GPU stays healthy)."""

    code: int
    status: str
    meaning: str
    source: str


XID_TABLE: dict[int, XidClass] = {
    row.code: row
    for row in (
        XidClass(13, WORKLOAD, "graphics engine exception", DEVICE_PLUGIN_XIDS),
        XidClass(31, WORKLOAD, "GPU memory page fault", DEVICE_PLUGIN_XIDS),
        XidClass(43, WORKLOAD, "GPU stopped processing", DEVICE_PLUGIN_XIDS),
        XidClass(45, WORKLOAD, "preemptive cleanup, due to previous errors", DEVICE_PLUGIN_XIDS),
        XidClass(68, WORKLOAD, "video processor exception", DEVICE_PLUGIN_XIDS),
        XidClass(48, FAILED, "double-bit ECC error", GKE_CRITICAL_XIDS),
        XidClass(63, DEGRADED, "ECC page retirement or row remapping recording event", GKE_CRITICAL_XIDS),
        XidClass(64, FAILED, "ECC page retirement or row remapper recording failure", GKE_CRITICAL_XIDS),
        XidClass(74, FAILED, "NVLink error", XID_CATALOGUE),
        XidClass(79, FAILED, "GPU has fallen off the bus", GKE_CRITICAL_XIDS),
        XidClass(92, DEGRADED, "high single-bit ECC error rate", XID_CATALOGUE),
        XidClass(94, DEGRADED, "contained ECC error", XID_CATALOGUE),
        XidClass(95, FAILED, "uncontained ECC error", XID_CATALOGUE),
        XidClass(119, FAILED, "GSP RPC timeout", GKE_CRITICAL_XIDS),
        XidClass(120, FAILED, "GSP error", GKE_CRITICAL_XIDS),
        XidClass(123, FAILED, "critical in GKE's GPU health checker", GKE_CRITICAL_XIDS),
        XidClass(140, FAILED, "critical in GKE's GPU health checker", GKE_CRITICAL_XIDS),
    )
}
# An XID outside the table: the GPU said something is wrong, and nobody has said it is the workload.
UNLISTED_XID_STATUS = DEGRADED


def xid_class(code: int) -> XidClass:
    """The table's row for an XID code, or a degraded row naming the catalogue for one it lacks."""
    return XID_TABLE.get(code) or XidClass(
        code, UNLISTED_XID_STATUS, "not in the collection's XID table", XID_CATALOGUE
    )


def xids_of(status: str) -> tuple[int, ...]:
    """The table's XID codes of one class, in order."""
    return tuple(sorted(code for code, row in XID_TABLE.items() if row.status == status))


# How a metric is read. CHANGED: its value changed within the window and is not 0 now (the last-XID
# gauge); INCREASED: a counter that grew within the window; SET: a gauge above 0 now.
CHANGED = "changed"
INCREASED = "increased"
SET = "set"

GPU_XID_ERROR = "gpu_xid_error"
GPU_ECC_UNCORRECTABLE = "gpu_ecc_uncorrectable"
GPU_ROW_REMAP_FAILED = "gpu_row_remap_failed"
GPU_ROW_REMAP_PENDING = "gpu_row_remap_pending"
GPU_RETIRED_PAGES_PENDING = "gpu_retired_pages_pending"
GPUS_MISSING_FROM_METRICS = "gpus_missing_from_metrics"
GPU_METRICS_UNKNOWN = "gpu_metrics_unknown"
# The health problem kinds the exporter's metrics raise.
METRIC_KINDS = (
    GPU_XID_ERROR,
    GPU_ECC_UNCORRECTABLE,
    GPU_ROW_REMAP_FAILED,
    GPU_ROW_REMAP_PENDING,
    GPU_RETIRED_PAGES_PENDING,
    GPUS_MISSING_FROM_METRICS,
    GPU_METRICS_UNKNOWN,
)


@dataclass(frozen=True)
class MetricSignal:
    """A metric of the exporter that says a GPU is bad: the health problem kind it raises, how it is
    read, the status it gives the node (None: by the XID table), whether the exporter's default
    counters collect it, and the counters-CSV line that does."""

    kind: str
    metric: str
    reading: str
    status: str | None
    default_on: bool
    csv_line: str
    source: str = EXPORTER_COUNTERS
    # Labels of the metric, beyond the node and the GPU, that say what the value is about.
    keep: tuple[str, ...] = ()


METRIC_SIGNALS = (
    MetricSignal(
        GPU_XID_ERROR,
        "DCGM_FI_DEV_XID_ERRORS",
        CHANGED,
        None,
        True,
        "DCGM_FI_DEV_XID_ERRORS, gauge, Value of the last XID error encountered.",
    ),
    MetricSignal(
        GPU_ECC_UNCORRECTABLE,
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        INCREASED,
        FAILED,
        False,
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, counter, Total number of double-bit volatile ECC errors.",
    ),
    MetricSignal(
        GPU_ECC_UNCORRECTABLE,
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        INCREASED,
        DEGRADED,
        True,
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS, counter, Number of remapped rows for uncorrectable errors",
    ),
    MetricSignal(
        GPU_ROW_REMAP_FAILED,
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        SET,
        FAILED,
        True,
        "DCGM_FI_DEV_ROW_REMAP_FAILURE, gauge, Whether remapping of rows has failed",
    ),
    MetricSignal(
        GPU_ROW_REMAP_PENDING,
        "DCGM_FI_DEV_ROW_REMAP_PENDING",
        SET,
        DEGRADED,
        False,
        "DCGM_FI_DEV_ROW_REMAP_PENDING, gauge, Whether remapping of rows is pending",
        DCGM_FIELDS,
    ),
    MetricSignal(
        GPU_RETIRED_PAGES_PENDING,
        "DCGM_FI_DEV_RETIRED_PENDING",
        SET,
        DEGRADED,
        False,
        "DCGM_FI_DEV_RETIRED_PENDING, counter, Total number of pages pending retirement.",
    ),
)
# The windowed XID count some exporter builds add (dcgm-exporter#239, #310): one series per XID seen
# within --xid-count-window-size, its code in the xid label. Read as SET, classed by the XID table.
XID_COUNT_SIGNAL = MetricSignal(
    GPU_XID_ERROR,
    "DCGM_EXP_XID_ERRORS_COUNT",
    SET,
    None,
    False,
    "DCGM_EXP_XID_ERRORS_COUNT, gauge, Count of XID Errors within user-specified time window "
    "(see xid-count-window-size param).",
    keep=(XID_LABEL,),
)
WATCHED_METRICS = tuple(dict.fromkeys([PRESENCE_METRIC, *(s.metric for s in METRIC_SIGNALS)]))
