# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every idea that more than one module takes as an option, declared once: its name, type,
default and range. A module names the groups it takes; `module_options` builds its argument spec
from them, and `check_ranges` holds every option that has a range to it. The doc fragments in
plugins/doc_fragments/options.py document the same groups, and a unit test holds the two together.

Names follow kubernetes.core where it has one (`label_selectors`, `wait`, `wait_timeout`, `src`).
Each group's spec is copied into every module that takes it (AnsibleModule fills sub-option
defaults into the default it is given). A module's earlier name for one of these options stays accepted as a deprecated alias until
ALIAS_REMOVAL (`module_options(..., renamed={old: new})`)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dcgm_signals import NODE_LABELS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.models import DEFAULT_MODEL_LABEL_KEYS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import NVIDIA_GPU
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError

COLLECTION = "kubegpu.scheduling"
ALIAS_REMOVAL = "2.0.0"

GPU_RESOURCES = "gpu_resources"
NODE_SELECTION = "node_selection"
SOURCES = "sources"
FAIL_ON = "fail_on"
PARALLELISM = "parallelism"
PAGE_SIZE = "page_size"
WAITING = "waiting"
EVICTION = "eviction"
MODEL_LABELS = "model_labels"
SYSTEM_COMPONENTS = "system_components"
PROMETHEUS = "prometheus"
DRIVER_UPGRADE = "driver_upgrade"

# The severities at or above which a check fails its task; `never` only reports.
FAIL_ON_CHOICES = ("error", "warning", "never")

GROUPS: Mapping[str, Mapping[str, Mapping[str, Any]]] = {
    GPU_RESOURCES: {
        "resource_names": {"type": "list", "elements": "str", "default": [NVIDIA_GPU]},
    },
    NODE_SELECTION: {
        "names": {"type": "list", "elements": "str"},
        "label_selectors": {"type": "list", "elements": "str", "default": []},
    },
    SOURCES: {
        "src": {"type": "list", "elements": "path"},
        "definition": {"type": "raw"},
    },
    FAIL_ON: {
        "fail_on": {"type": "str", "choices": list(FAIL_ON_CHOICES), "default": "error"},
    },
    PARALLELISM: {
        "parallelism": {"type": "int", "default": 16},
    },
    PAGE_SIZE: {
        "page_size": {"type": "int", "default": 500},
    },
    WAITING: {
        "wait": {"type": "bool", "default": True},
        "wait_timeout": {"type": "int", "default": 300},
    },
    EVICTION: {
        "evict": {"type": "bool", "default": False},
        "eviction_timeout": {"type": "int", "default": 300},
        "force_delete": {"type": "bool", "default": False},
    },
    MODEL_LABELS: {
        "model_label_keys": {
            "type": "list",
            "elements": "str",
            "default": list(DEFAULT_MODEL_LABEL_KEYS),
            "no_log": False,
        },
    },
    SYSTEM_COMPONENTS: {
        "system_components": {
            "type": "dict",
            "default": {},
            "options": {
                "builtin": {"type": "bool", "default": True},
                "extra": {"type": "list", "elements": "dict", "default": []},
            },
        },
    },
    PROMETHEUS: {
        "prometheus": {
            "type": "dict",
            "options": {
                "url": {"type": "str", "required": True},
                "bearer_token": {"type": "str", "no_log": True},
                "username": {"type": "str"},
                "password": {"type": "str", "no_log": True},
                "ca_cert": {"type": "path"},
                "client_cert": {"type": "path"},
                "client_key": {"type": "path", "no_log": False},
                "validate_certs": {"type": "bool", "default": True},
                "headers": {"type": "dict", "default": {}},
                "proxy": {"type": "str"},
                "timeout": {"type": "int", "default": 30},
                "node_labels": {"type": "list", "elements": "str", "default": list(NODE_LABELS)},
                "window": {"type": "str", "default": "10m"},
                "job": {"type": "str", "default": ".*dcgm.*"},
                "stale_after": {"type": "int", "default": 120},
                "recorded": {"type": "bool", "default": False},
            },
        },
    },
    DRIVER_UPGRADE: {
        "driver_upgrade": {
            "type": "dict",
            "default": {},
            "options": {
                "stuck_after": {"type": "int", "default": 3600},
                "read_objects": {"type": "bool", "default": False},
            },
        },
    },
}

# The doc fragment that documents each group.
FRAGMENTS: Mapping[str, str] = {
    **{group: f"{COLLECTION}.options.{group}" for group in GROUPS},
    MODEL_LABELS: f"{COLLECTION}.model_labels",
}

# Inclusive bounds of the options that have them (None: no upper bound).
RANGES: Mapping[str, tuple[int, int | None]] = {
    "parallelism": (1, 256),
    "page_size": (1, None),
    "wait_timeout": (0, None),
    "eviction_timeout": (0, None),
}

# Which group each option belongs to.
GROUP_OF: Mapping[str, str] = {option: group for group, options in GROUPS.items() for option in options}


def module_options(
    own: Mapping[str, Mapping[str, Any]],
    groups: tuple[str, ...],
    renamed: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A module's argument spec: its own options, then those of `groups`. `renamed` maps an earlier
    option name of this module to the group option that replaces it; the old name stays an alias,
    deprecated until ALIAS_REMOVAL."""
    spec: dict[str, Any] = {name: dict(option) for name, option in own.items()}
    for group in groups:
        for name, option in GROUPS[group].items():
            if name in spec:
                raise ValueError(f"option {name} is both the module's own and in the group {group}")
            spec[name] = copy.deepcopy(dict(option))
    for old, new in (renamed or {}).items():
        option = spec[new]
        option["aliases"] = [*option.get("aliases", []), old]
        option["deprecated_aliases"] = [
            *option.get("deprecated_aliases", []),
            {"name": old, "version": ALIAS_REMOVAL, "collection_name": COLLECTION},
        ]
    return spec


def range_problem(name: str, value: Any) -> str | None:
    """Why `value` is out of the range of option `name`, or None."""
    if name not in RANGES or value is None:
        return None
    low, high = RANGES[name]
    if value < low or (high is not None and value > high):
        within = f"between {low} and {high}" if high is not None else f"at least {low}"
        return f"{name} must be {within}, not {value}"
    return None


def check_ranges(params: Mapping[str, Any]) -> None:
    """Raise an OptionError naming the first option out of its range."""
    for name in sorted(RANGES):
        problem = range_problem(name, params.get(name))
        if problem:
            raise OptionError(problem)
