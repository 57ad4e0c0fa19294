# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``version: v1`` config file of NVIDIA's device plugin, as the pinned releases read it.

Source: NVIDIA/k8s-device-plugin api/config/v1 (config.go, flags.go, replicas.go, resources.go,
sharing.go, imex.go, consts.go) and cmd/nvidia-device-plugin/main.go (validateFlags), at the tags
v0.17.4 (fd56a747defe15333adce40fcd3a06ffb129251b) and v0.18.2
(fb1242add205d8563f9c604b8ba239607b4083e6). The two differ in one key: flags.gdrcopyEnabled is read
from v0.18.0 on.

How the plugin reads the file: sigs.k8s.io/yaml turns it into JSON and encoding/json decodes it,
which ignores keys it does not know and, in plain structs, matches keys without regard to case;
a value of the wrong type is an error and the plugin exits. The sharing sections
(ReplicatedResources, ReplicatedResource) and resources entries have their own decoders, which read
named keys exactly and ignore the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.device_plugins import (
    DEFAULT_PLUGIN_RELEASE,
    PLUGIN_RELEASES,
)

VERSION = "v1"
RELEASES = PLUGIN_RELEASES
DEFAULT_RELEASE = DEFAULT_PLUGIN_RELEASE

# The value types, in the words of the findings.
STRING = "a string"
BOOLEAN = "true or false"
DURATION = 'a duration ("30s", "1m") or a number of nanoseconds'
STRINGS = "a string or a list of strings"
MAPPING = "a mapping"
LIST = "a list"
INTEGERS = "a list of integers"


@dataclass(frozen=True)
class Key:
    type: str
    since: str = ""  # the first release that reads it; empty: every pinned release
    example: str = ""


# Plain structs (case-insensitive keys), by path.
TOP = {
    "version": Key(STRING),
    "flags": Key(MAPPING),
    "resources": Key(MAPPING),
    "sharing": Key(MAPPING),
    "imex": Key(MAPPING),
}
FLAGS = {
    "migStrategy": Key(STRING, example=": none"),
    "failOnInitError": Key(BOOLEAN, example=": true"),
    "mpsRoot": Key(STRING, example=": /run/nvidia/mps"),
    "nvidiaDriverRoot": Key(STRING, example=": /"),
    "nvidiaDevRoot": Key(STRING),
    "gdrcopyEnabled": Key(BOOLEAN, since="v0.18.0"),
    "gdsEnabled": Key(BOOLEAN),
    "mofedEnabled": Key(BOOLEAN),
    "useNodeFeatureAPI": Key(BOOLEAN),
    "deviceDiscoveryStrategy": Key(STRING, example=": auto"),
    "plugin": Key(MAPPING),
    "gfd": Key(MAPPING),
}
PLUGIN_FLAGS = {
    "passDeviceSpecs": Key(BOOLEAN),
    "deviceListStrategy": Key(STRINGS, example=": envvar"),
    "deviceIDStrategy": Key(STRING, example=": uuid"),
    "cdiAnnotationPrefix": Key(STRING),
    "nvidiaCTKPath": Key(STRING),
    "containerDriverRoot": Key(STRING),
}
GFD_FLAGS = {
    "oneshot": Key(BOOLEAN),
    "noTimestamp": Key(BOOLEAN),
    "sleepInterval": Key(DURATION, example=": 60s"),
    "outputFile": Key(STRING),
    "machineTypeFile": Key(STRING),
}
RESOURCES = {"gpus": Key(LIST), "mig": Key(LIST)}
SHARING = {"timeSlicing": Key(MAPPING), "mps": Key(MAPPING)}
IMEX = {"channelIDs": Key(INTEGERS, example=": [0]"), "required": Key(BOOLEAN)}
# Exact keys (their own decoders).
REPLICATED = {
    "renameByDefault": Key(BOOLEAN, example=": true"),
    "failRequestsGreaterThanOne": Key(BOOLEAN, example=": true"),
    "resources": Key(LIST),
}
REPLICATED_RESOURCE = {
    "name": Key(STRING, example=": nvidia.com/gpu"),
    "rename": Key(STRING),
    "devices": Key('"all", a count or a list of GPU indices or UUIDs'),
    "replicas": Key("an integer", example=": 4"),
}
RESOURCE_PATTERN = {"pattern": Key(STRING), "name": Key(STRING)}

# Where each key of a struct belongs, for a key found in the wrong place.
SECTIONS = {
    "": TOP,
    "flags": FLAGS,
    "flags.plugin": PLUGIN_FLAGS,
    "flags.gfd": GFD_FLAGS,
    "resources": RESOURCES,
    "sharing": SHARING,
    "sharing.timeSlicing": REPLICATED,
    "sharing.timeSlicing.resources[]": REPLICATED_RESOURCE,
    "imex": IMEX,
}

MIG_STRATEGIES = ("none", "single", "mixed")
DEVICE_LIST_STRATEGIES = ("envvar", "volume-mounts", "cdi-annotations", "cdi-cri")
DEVICE_ID_STRATEGIES = ("uuid", "index")
DEVICE_DISCOVERY_STRATEGIES = ("auto", "nvml", "tegra")
CHOICES = {
    "flags.migStrategy": (MIG_STRATEGIES, "unknown MIG strategy"),
    "flags.deviceDiscoveryStrategy": (DEVICE_DISCOVERY_STRATEGIES, "invalid --device-discovery-strategy option"),
    "flags.plugin.deviceIDStrategy": (DEVICE_ID_STRATEGIES, "invalid --device-id-strategy option"),
    "flags.plugin.deviceListStrategy": (DEVICE_LIST_STRATEGIES, "invalid --device-list-strategy option"),
}

RESOURCE_PREFIX = "nvidia.com"
SHARED_SUFFIX = ".shared"
MAX_RESOURCE_NAME = 63
STRATEGY_NONE, STRATEGY_TIME_SLICING, STRATEGY_MPS = "none", "time-slicing", "mps"
SECTION_OF_STRATEGY = {STRATEGY_TIME_SLICING: "timeSlicing", STRATEGY_MPS: "mps"}


def release_key(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in release.lstrip("v").split("."))


def reads(key: Key, release: str) -> bool:
    """Whether this release reads the key."""
    return not key.since or release_key(release) >= release_key(key.since)


def home_of(name: str, release: str) -> str | None:
    """The path where a key of this name belongs (the first section that has it), or None."""
    for section, keys in SECTIONS.items():
        if name in keys and reads(keys[name], release):
            return f"{section}.{name}" if section else name
    return None


# What the plugin, its MPS control daemon and its Helm chart decide beyond the file's schema, each rule
# with the code it comes from: NVIDIA/k8s-device-plugin at the default release UPSTREAM_TAG (the same
# code at v0.17.4), and the GPU Operator at OPERATOR_TAG for what the operator's DaemonSet sets.
UPSTREAM = "NVIDIA/k8s-device-plugin"
UPSTREAM_TAG, UPSTREAM_COMMIT = "v0.18.2", "fb1242add205d8563f9c604b8ba239607b4083e6"
OPERATOR = "NVIDIA/gpu-operator"
OPERATOR_TAG, OPERATOR_COMMIT = "v26.7.0", "10ee5b3638b89e11e949412aafa5ba99279c3721"


@dataclass(frozen=True)
class Rule:
    """One decision of the upstream code the check follows: the kinds it yields, where it is, what it says."""

    kinds: tuple[str, ...]
    sources: tuple[str, ...]  # path:lines at UPSTREAM_TAG (prefixed with OPERATOR for the GPU Operator)
    says: str


RULES = (
    Rule(
        ("config_mps_without_root",),
        (
            "cmd/nvidia-device-plugin/main.go:205-211",
            "cmd/nvidia-device-plugin/main.go:140-142",
            "api/config/v1/config.go:43-56",
            "api/config/v1/flags.go:32-49",
            "deployments/helm/nvidia-device-plugin/templates/daemonset-device-plugin.yml:138-139",
            "deployments/helm/nvidia-device-plugin/values.yaml:148-153",
            "deployments/static/nvidia-device-plugin.yml:43",
            f"{OPERATOR}:assets/state-device-plugin/0500_daemonset.yaml:85-86",
            f"{OPERATOR}:controllers/object_controls.go:1606-1617",
        ),
        "MPS needs an MPS root (--mps-root, MPS_ROOT or flags.mpsRoot); the Helm chart sets MPS_ROOT from "
        "mps.root (default /run/nvidia/mps) and the GPU Operator always sets it, the static DaemonSet never: "
        "the root is judged only where the deployment is seen",
    ),
    Rule(
        ("config_missing_field",),
        ("api/config/v1/replicas.go:193-196", "api/config/v1/replicas.go:203-205", "api/config/v1/sharing.go:22-24"),
        "a sharing section without resources (timeSlicing: or mps: {}, or an empty list) is refused: no "
        "resources specified; an empty mps: is null for its pointer field and means no MPS",
    ),
    Rule(
        ("config_mps_replicas_over_limit", "config_mps_replicas_over_pre_volta_limit"),
        ("cmd/mps-control-daemon/mps/device.go:34-55", "cmd/mps-control-daemon/mps/manager.go:91-100"),
        "the MPS control daemon refuses more replicas than MPS clients per GPU: 48 from compute capability "
        "7.5 on, 16 below",
    ),
    Rule(
        ("config_chart_no_default", "config_chart_name_and_map"),
        (
            "deployments/helm/nvidia-device-plugin/templates/validation.yml:22-39",
            "deployments/helm/nvidia-device-plugin/templates/_helpers.tpl:212-232",
            "deployments/helm/nvidia-device-plugin/values.yaml:20-28",
        ),
        "the chart refuses to render config.map with more than one entry and no default it can infer "
        "(config.default, or the fallbacks: named, an entry named default; single, one entry; empty), and "
        "config.name together with config.map",
    ),
    Rule(
        ("config_shared_resource_not_advertised",),
        (
            "internal/rm/rm.go:99-106",
            "internal/rm/rm.go:129-135",
            "internal/rm/device_map.go:79-81",
            "internal/rm/device_map.go:301-311",
            "api/config/v1/config.go:85-91",
            "deployments/helm/nvidia-device-plugin/templates/daemonset-device-plugin.yml:140-142",
            f"{OPERATOR}:controllers/object_controls.go:2786-2798",
        ),
        "a shared resource is matched against the device resources: nvidia.com/gpu always (MIG devices too "
        "under single), nvidia.com/mig-<profile> under mixed only; a name no device has is skipped",
    ),
)

# The MPS control daemon's clients per GPU (cmd/mps-control-daemon/mps/device.go:43-49).
MPS_MAX_CLIENTS = 48
MPS_MAX_CLIENTS_BELOW_7_5 = 16
# The Helm chart's defaults (values.yaml:28, :153) and the GPU Operator's MPS root (object_controls.go:185).
CHART_FALLBACK_STRATEGIES = ("named", "single")
CHART_MPS_ROOT = OPERATOR_MPS_ROOT = "/run/nvidia/mps"
# The device resources a shared resource can match (internal/rm/rm.go:99-135).
GPU_RESOURCE = f"{RESOURCE_PREFIX}/gpu"
MIG_RESOURCE_PREFIX = f"{RESOURCE_PREFIX}/mig-"
MIG_UNKNOWN = "?"  # the deployment sets the MIG strategy, and the checker does not see to what


def device_resource(name: str, mig_strategy: str) -> bool:
    """Whether a device resource of this name can exist under the MIG strategy (shared resources are
    matched against them; internal/rm/device_map.go:301-311)."""
    if name == GPU_RESOURCE:
        return True
    return name.startswith(MIG_RESOURCE_PREFIX) and mig_strategy in ("mixed", MIG_UNKNOWN)
