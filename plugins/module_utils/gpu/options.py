# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which resources count as GPUs, which pods are the device plugin's and which are GPU system
components: the options every fleet-wide check shares."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.components import (
    BUILTIN_CATALOGUE,
    ComponentCatalogue,
    catalogue_from_option,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.device_plugins import (
    DEFAULT_DEVICE_PLUGIN_SELECTORS,
    DEFAULT_DRA_PLUGIN_SELECTORS,
    DEFAULT_EXEMPT_POD_SELECTORS,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.health_table import BUILTIN_TABLE, HealthTable
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.models import (
    DEFAULT_MODEL_LABEL_KEYS,
    VERSION_LABELS,
    needed_label_keys,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import (
    MIG_RESOURCE_PATTERN,
    NVIDIA_GPU,
    gpu_resource_matcher,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.selectors import (
    LabelSelector,
    parse_label_selector,
)


@dataclass(frozen=True)
class FleetOptions:
    resource_names: tuple[str, ...] = (NVIDIA_GPU,)
    model_label_keys: tuple[str, ...] = DEFAULT_MODEL_LABEL_KEYS
    plugin_namespaces: frozenset[str] = frozenset()
    plugin_selectors: tuple[LabelSelector, ...] = tuple(
        parse_label_selector(s) for s in DEFAULT_DEVICE_PLUGIN_SELECTORS
    )
    exempt_selectors: tuple[LabelSelector, ...] = tuple(parse_label_selector(s) for s in DEFAULT_EXEMPT_POD_SELECTORS)
    dra_plugin_selectors: tuple[LabelSelector, ...] = tuple(
        parse_label_selector(s) for s in DEFAULT_DRA_PLUGIN_SELECTORS
    )
    is_gpu: Callable[[str], bool] = field(default=gpu_resource_matcher(), compare=False)
    components: ComponentCatalogue = field(default=BUILTIN_CATALOGUE, compare=False)
    # The facts list every DRA device (True), or only those with a problem (gpu_node_facts' dra_devices).
    all_dra_devices: bool = False
    # The health signals and expected GPU counts the health view judges by (gpu_node_facts' health).
    health: HealthTable = field(default=BUILTIN_TABLE, compare=False)

    def counts(self, resource: str) -> bool:
        """Whether a resource counts as whole GPUs in capacity, allocatable and allocated."""
        return resource in self.resource_names or fnmatchcase(resource, MIG_RESOURCE_PATTERN)

    @property
    def primary_resource(self) -> str:
        return self.resource_names[0] if self.resource_names else NVIDIA_GPU

    @property
    def label_keys(self) -> frozenset[str]:
        return needed_label_keys(self.model_label_keys) | frozenset(VERSION_LABELS)


def _string_list(value: object, option: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v.strip() for v in value):
        raise OptionError(f"{option} must be a list of non-empty strings, got {value!r}")
    return [v.strip() for v in value]


def options_from_params(
    resource_names: object = None,
    model_label_keys: object = None,
    device_plugin: object = None,
    exempt_pod_selectors: object = None,
    system_components: object = None,
) -> FleetOptions:
    """Module parameters as FleetOptions; None means the default. Raises OptionError."""
    names = tuple(_string_list(resource_names, "resource_names")) or (NVIDIA_GPU,)
    keys = tuple(_string_list(model_label_keys, "model_label_keys")) or DEFAULT_MODEL_LABEL_KEYS
    plugin = device_plugin if device_plugin is not None else {}
    if not isinstance(plugin, Mapping):
        raise OptionError(f"device_plugin must be a dictionary, got {plugin!r}")
    namespaces = frozenset(_string_list(plugin.get("namespaces"), "device_plugin.namespaces"))
    selector_texts = plugin.get("label_selectors")
    plugin_selectors = (
        _string_list(selector_texts, "device_plugin.label_selectors")
        if selector_texts is not None
        else list(DEFAULT_DEVICE_PLUGIN_SELECTORS)
    )
    exempt_texts = (
        _string_list(exempt_pod_selectors, "exempt_pod_selectors")
        if exempt_pod_selectors is not None
        else list(DEFAULT_EXEMPT_POD_SELECTORS)
    )
    return FleetOptions(
        resource_names=names,
        model_label_keys=keys,
        plugin_namespaces=namespaces,
        plugin_selectors=tuple(parse_label_selector(s) for s in plugin_selectors),
        exempt_selectors=tuple(parse_label_selector(s) for s in exempt_texts),
        is_gpu=gpu_resource_matcher(names),
        components=catalogue_from_option(system_components),
    )


DEFAULT_OPTIONS = FleetOptions()
