# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node conditions and node taints by which health producers say a GPU node is bad, as data.

Each row names a node condition type and the status that means bad, or a node taint key, with
the severity it gives the node (``degraded``: some GPUs or some capacity lost; ``failed``: the
node's GPUs must not take work) and the producer, with the source where the name was read.
Users extend the table (``health.signals`` of gpu_node_facts): a row of theirs for a condition
type or taint key the table holds replaces that row.

Checked against the sources named beside each group. Not in the table, on purpose:
node-problem-detector ships no GPU condition of its own (its conditions are named by the custom
plugin configuration a cluster gives it, so they are rows users add), and facebookresearch/gcm's
XID check (health_checks check-syslogs xid) reports an exit code to its sinks, not a node
condition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError

HEALTHY = "healthy"
# Nothing said the node is bad, and a source that should have said (the DCGM exporter's metrics) could not.
UNKNOWN = "unknown"
DEGRADED = "degraded"
FAILED = "failed"
# Worst last: a node's status is the worst of its problems'. Unknown is worse than healthy only: a node
# that a source could not judge is still degraded or failed by what the others say.
HEALTH_STATUSES = (HEALTHY, UNKNOWN, DEGRADED, FAILED)
PROBLEM_SEVERITIES = (DEGRADED, FAILED)
CONDITION_STATUSES = ("True", "False", "Unknown")

SIGNAL_CONDITION = "condition"
SIGNAL_TAINT = "taint"
USER_PRODUCER = "user"


@dataclass(frozen=True)
class HealthSignal:
    """A node condition type (``kind`` condition, bad when its status is ``bad_status``) or a node
    taint key (``kind`` taint, bad whenever the node carries it, whatever its value and effect)."""

    kind: str
    name: str
    severity: str
    producer: str
    source: str = ""
    bad_status: str = "True"


# EKS node monitoring agent: pkg/conditions/conditions.go (AcceleratedHardwareReady), set False with
# the reason naming the check (NvidiaXID..., DCGMError ...); docs/node-health-issues.adoc.
# aws/eks-node-monitoring-agent@51af5494fde6d2ed4629df2ed9f847ae800957fd
_EKS = (
    "https://github.com/aws/eks-node-monitoring-agent/blob/51af5494fde6d2ed4629df2ed9f847ae800957fd/"
    "pkg/conditions/conditions.go"
)
# GKE: the NVIDIA device plugin's health checker sets XidCriticalError=True, its reason a JSON map of
# the critical XIDs seen (XIDConditionType in pkg/gpu/nvidia/health_check/health_checker.go).
# GoogleCloudPlatform/container-engine-accelerators@992db81257553607f1477945f1b3219632991829
_GKE = (
    "https://github.com/GoogleCloudPlatform/container-engine-accelerators/blob/"
    "992db81257553607f1477945f1b3219632991829/pkg/gpu/nvidia/health_check/health_checker.go"
)
# NVSentinel: the platform connector makes the check name the condition type, status True for a fatal
# event, False once healthy (platform-connectors/pkg/connectors/kubernetes/process_node_events.go,
# @033cd4939c13d03288896936dd621eba39759b05); the GPU health monitor names DCGM's health watches
# Gpu<Watch>Watch (DCGM_HEALTH_WATCH_PCIE: GpuPcieWatch; gpu_health_monitor/platform_connector/
# platform_connector.py @00103c125afa8e55c5d4a0d5bdc3141c1007e307); the syslog monitor's checks are
# SysLogsXIDError, SysLogsSXIDError, SysLogsGPUFallenOff (health-monitors/syslog-health-monitor/main.go
# @7508d7b387a42f8b9e4b852ee88967eee30d4867). The taints are opt-in in its fault-quarantine rulesets;
# these are the keys its integration guide lists (docs/INTEGRATIONS.md @9087c1f8822a156e74a8585ec63b1250ad881b8f).
_NVSENTINEL = "https://github.com/NVIDIA/NVSentinel/blob/"
_NVSENTINEL_DCGM = (
    _NVSENTINEL + "00103c125afa8e55c5d4a0d5bdc3141c1007e307/health-monitors/gpu-health-monitor/"
    "gpu_health_monitor/platform_connector/platform_connector.py"
)
_NVSENTINEL_SYSLOG = (
    _NVSENTINEL + "7508d7b387a42f8b9e4b852ee88967eee30d4867/health-monitors/syslog-health-monitor/main.go"
)
_NVSENTINEL_TAINTS = _NVSENTINEL + "9087c1f8822a156e74a8585ec63b1250ad881b8f/docs/INTEGRATIONS.md"

_NVSENTINEL_DCGM_WATCHES = (
    "GpuMemWatch",
    "GpuPcieWatch",
    "GpuThermalWatch",
    "GpuPowerWatch",
    "GpuInforomWatch",
    "GpuSmWatch",
    "GpuNvlinkWatch",
    "GpuMcuWatch",
    "GpuPmuWatch",
    "GpuDriverWatch",
    "GpuCpusetWatch",
    "GpuNvswitchFatalWatch",
    "GpuAllWatch",
)
_NVSENTINEL_SYSLOG_CHECKS = ("SysLogsXIDError", "SysLogsSXIDError", "SysLogsGPUFallenOff")
_NVSENTINEL_TAINT_KEYS = (
    "nvidia.com/gpu-xid-error",
    "nvidia.com/gpu-nvlink-error",
    "nvidia.com/syslog-xid-error",
    "nvidia.com/gpu-error",
)

# Kubernetes: the node lifecycle controller taints a node node.kubernetes.io/not-ready while its Ready
# condition is False and node.kubernetes.io/unreachable while it is Unknown (the kubelet stopped reporting):
# its GPUs take no work either way. staging/src/k8s.io/api/core/v1/well_known_taints.go.
_KUBERNETES = (
    "https://github.com/kubernetes/kubernetes/blob/aed80471ab6fbe2c2f884d1000108db3b65246b8/"
    "staging/src/k8s.io/api/core/v1/well_known_taints.go"
)
_NODE_LIFECYCLE_TAINT_KEYS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")

BUILTIN_SIGNALS: tuple[HealthSignal, ...] = (
    *(
        HealthSignal(SIGNAL_TAINT, key, FAILED, "Kubernetes node lifecycle controller", _KUBERNETES)
        for key in _NODE_LIFECYCLE_TAINT_KEYS
    ),
    HealthSignal(SIGNAL_CONDITION, "AcceleratedHardwareReady", FAILED, "EKS node monitoring agent", _EKS, "False"),
    HealthSignal(SIGNAL_CONDITION, "XidCriticalError", FAILED, "GKE NVIDIA GPU device plugin", _GKE),
    *(
        HealthSignal(SIGNAL_CONDITION, name, FAILED, "NVIDIA NVSentinel", _NVSENTINEL_DCGM)
        for name in _NVSENTINEL_DCGM_WATCHES
    ),
    *(
        HealthSignal(SIGNAL_CONDITION, name, FAILED, "NVIDIA NVSentinel", _NVSENTINEL_SYSLOG)
        for name in _NVSENTINEL_SYSLOG_CHECKS
    ),
    *(
        HealthSignal(SIGNAL_TAINT, key, FAILED, "NVIDIA NVSentinel", _NVSENTINEL_TAINTS)
        for key in _NVSENTINEL_TAINT_KEYS
    ),
)


@dataclass(frozen=True)
class HealthTable:
    """The signals by kind and name, and the GPUs expected per model (an expectation beats the
    node's own count label)."""

    conditions: Mapping[str, HealthSignal]
    taints: Mapping[str, HealthSignal]
    expected_gpus: Mapping[str, int]

    @property
    def rows(self) -> list[HealthSignal]:
        return [*self.conditions.values(), *self.taints.values()]


def table_of(signals: Sequence[HealthSignal], expected_gpus: Mapping[str, int] | None = None) -> HealthTable:
    """Later rows replace earlier ones of the same kind and name."""
    conditions: dict[str, HealthSignal] = {}
    taints: dict[str, HealthSignal] = {}
    for signal in signals:
        (conditions if signal.kind == SIGNAL_CONDITION else taints)[signal.name] = signal
    return HealthTable(conditions, taints, dict(expected_gpus or {}))


BUILTIN_TABLE = table_of(BUILTIN_SIGNALS)

_ROW_KEYS = ("condition", "taint", "bad_status", "severity", "producer", "source")


def _text(row: Mapping[str, Any], key: str, where: str, default: str) -> str:
    value = row.get(key)
    if value is None:
        return default
    if not isinstance(value, str) or not value.strip():
        raise OptionError(f"{where}.{key} must be a non-empty string, got {value!r}")
    return value.strip()


def signal_from_row(row: object, where: str) -> HealthSignal:
    """One user row: ``condition`` (with ``bad_status``, default True) or ``taint``, and
    ``severity`` (default failed), ``producer``, ``source``. Raises OptionError naming the key."""
    if not isinstance(row, Mapping):
        raise OptionError(f"{where} must be a dictionary with condition or taint, got {row!r}")
    unknown = sorted(str(k) for k in row if k not in _ROW_KEYS)
    if unknown:
        raise OptionError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(_ROW_KEYS)}")
    named = [key for key in (SIGNAL_CONDITION, SIGNAL_TAINT) if row.get(key) is not None]
    if len(named) != 1:
        raise OptionError(f"{where}: give exactly one of condition and taint, got {row!r}")
    kind = named[0]
    name = _text(row, kind, where, "")
    severity = _text(row, "severity", where, FAILED)
    if severity not in PROBLEM_SEVERITIES:
        raise OptionError(f"{where}.severity must be one of {', '.join(PROBLEM_SEVERITIES)}, got {severity!r}")
    bad_status = row.get("bad_status")
    if kind == SIGNAL_TAINT and bad_status is not None:
        raise OptionError(f"{where}.bad_status applies to a condition only: a taint is bad whenever it is there")
    if isinstance(bad_status, bool):  # YAML reads an unquoted True as a boolean
        bad_status = str(bad_status)
    bad_status = _text({"bad_status": bad_status}, "bad_status", where, "True")
    if bad_status not in CONDITION_STATUSES:
        raise OptionError(f"{where}.bad_status must be one of {', '.join(CONDITION_STATUSES)}, got {bad_status!r}")
    producer = _text(row, "producer", where, USER_PRODUCER)
    return HealthSignal(kind, name, severity, producer, _text(row, "source", where, ""), bad_status)


def _expected_gpus(value: object, where: str) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise OptionError(f"{where} must be a dictionary of model: GPU count, got {value!r}")
    expected = {}
    for model, count in value.items():
        if not isinstance(model, str) or not model.strip():
            raise OptionError(f"{where}: a model must be a non-empty string, got {model!r}")
        if isinstance(count, str) and count.strip().isdigit():  # a templated value arrives as text
            count = int(count)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise OptionError(f"{where}[{model!r}] must be a whole number of GPUs above 0, got {count!r}")
        expected[model.strip()] = count
    return expected


def health_argument_spec() -> dict[str, Any]:
    """The `health` option (a new dict each time: AnsibleModule fills sub-option defaults into it). Rows are
    checked here, not by the argument spec, so that an error names the row's index."""
    return {
        "type": "dict",
        "default": {},
        "options": {
            "builtin_signals": {"type": "bool", "default": True},
            "signals": {"type": "list", "elements": "dict", "default": []},
            "expected_gpus": {"type": "dict", "default": {}},
        },
    }


def health_table_from_option(value: object, option: str = "health") -> HealthTable:
    """The option {builtin_signals: bool, signals: [rows], expected_gpus: {model: count}} as a table;
    None means the built-in table. Raises OptionError naming the row index and key."""
    if value is None:
        return BUILTIN_TABLE
    if not isinstance(value, Mapping):
        raise OptionError(f"{option} must be a dictionary with builtin_signals, signals and expected_gpus")
    known = ("builtin_signals", "signals", "expected_gpus")
    unknown = sorted(str(k) for k in value if k not in known)
    if unknown:
        raise OptionError(f"{option}: unknown key(s) {', '.join(unknown)}; known: {', '.join(known)}")
    builtin = value.get("builtin_signals")
    if builtin is not None and not isinstance(builtin, bool):
        raise OptionError(f"{option}.builtin_signals must be true or false, got {builtin!r}")
    rows = value.get("signals") or []
    if not isinstance(rows, list):
        raise OptionError(f"{option}.signals must be a list of rows, got {rows!r}")
    extra = [signal_from_row(row, f"{option}.signals[{index}]") for index, row in enumerate(rows)]
    expected = _expected_gpus(value.get("expected_gpus"), f"{option}.expected_gpus")
    return table_of([*(BUILTIN_SIGNALS if builtin is not False else ()), *extra], expected)
