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
