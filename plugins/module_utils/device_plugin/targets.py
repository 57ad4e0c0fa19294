# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which DaemonSets are checked: the options, the queries that find plugin pods, the selection."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.findings import (
    KIND_DAEMONSET_MISSING,
    found,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import FleetOptions, options_from_params
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import namespaced_name
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.selectors import parse_label_selector

_DNS_NAME = re.compile(r"^[a-z0-9](?:[-a-z0-9.]*[a-z0-9])?$")


@dataclass(frozen=True)
class DaemonSetTarget:
    """A DaemonSet to check by name, or the DaemonSets a label selector finds (in a namespace or all)."""

    namespace: str | None
    name: str | None
    label_selector: str | None

    @property
    def text(self) -> str:
        if self.name:
            return f"DaemonSet {self.namespace}/{self.name}"
        where = f" in namespace {self.namespace}" if self.namespace else ""
        return f"DaemonSets matching {self.label_selector!r}{where}"


def _optional_name(entry: Mapping[str, Any], key: str, where: str) -> str | None:
    value = entry.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not _DNS_NAME.match(value) or len(value) > 253:
        raise OptionError(f"{where}.{key}: {value!r} is not a valid Kubernetes name")
    return value


def daemonset_targets(value: object) -> list[DaemonSetTarget] | None:
    """The `daemonsets` option: None or an empty list means discover every known deployment."""
    if value is None or value == []:
        return None
    if not isinstance(value, list):
        raise OptionError(f"daemonsets must be a list of {{namespace, name}} or {{label_selector}}, got {value!r}")
    targets = []
    for index, raw in enumerate(value):
        where = f"daemonsets[{index}]"
        if not isinstance(raw, Mapping):
            raise OptionError(f"{where} must be a dictionary, got {raw!r}")
        namespace, name = _optional_name(raw, "namespace", where), _optional_name(raw, "name", where)
        selector = raw.get("label_selector") or None
        if selector is not None:
            try:
                parse_label_selector(selector)
            except OptionError as exc:
                raise OptionError(f"{where}.label_selector: {exc}") from None
        if name and not namespace:
            raise OptionError(f"{where}: name {name!r} needs a namespace")
        if name and selector:
            raise OptionError(f"{where}: give either name or label_selector, not both")
        if not name and not selector:
            raise OptionError(f"{where}: give a namespace and name, or a label_selector")
        targets.append(DaemonSetTarget(namespace, name, selector))
    return targets


def check_options(resource_names: object, device_plugin: object) -> FleetOptions:
    """The check's options: `resource_names` is one resource or a list of them, the first the one the
    findings speak of."""
    names = [resource_names] if isinstance(resource_names, str) else resource_names
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n.strip() for n in names):
        raise OptionError(f"resource_names must be a list of non-empty strings, got {resource_names!r}")
    try:
        return options_from_params(resource_names=[n.strip() for n in names], device_plugin=device_plugin)
    except OptionError as exc:
        raise OptionError(str(exc)) from None


def plugin_pod_queries(options: FleetOptions, daemonsets: Iterable[Mapping[str, Any]]) -> list[tuple[str | None, str]]:
    """(namespace or None for all, label selector) pairs that find every plugin pod: one per configured
    selector (per configured namespace), and one per checked DaemonSet's own pod selector."""
    namespaces: list[str | None] = [*sorted(options.plugin_namespaces)] or [None]
    queries = [(namespace, s.text) for s in options.plugin_selectors for namespace in namespaces]
    queries += [
        (d["namespace"], d["pod_selector"])
        for d in daemonsets
        if d["pod_selector"] and (None, d["pod_selector"]) not in queries
    ]
    return list(dict.fromkeys(queries))


def is_plugin_daemonset(daemonset: Mapping[str, Any], options: FleetOptions) -> bool:
    """Whether a DaemonSet's pods are device-plugin pods, by the device_plugin selectors."""
    if options.plugin_namespaces and daemonset["namespace"] not in options.plugin_namespaces:
        return False
    return any(s.matches(daemonset["template_labels"]) for s in options.plugin_selectors)


def is_dra_daemonset(daemonset: Mapping[str, Any], options: FleetOptions) -> bool:
    """Whether a DaemonSet runs the kubelet plugin of a GPU DRA driver, by its pod template labels."""
    return any(s.matches(daemonset["template_labels"]) for s in options.dra_plugin_selectors)


def target_matches(target: DaemonSetTarget, daemonset: Mapping[str, Any]) -> bool:
    """A named DaemonSet, or one whose own labels or pod template labels match the selector."""
    if target.namespace and daemonset["namespace"] != target.namespace:
        return False
    if target.name:
        return bool(daemonset["name"] == target.name)
    selector = parse_label_selector(target.label_selector)
    return selector.matches(daemonset["labels"]) or selector.matches(daemonset["template_labels"])


def daemonset_list_namespaces(targets: Sequence[DaemonSetTarget] | None, options: FleetOptions) -> list[str] | None:
    """The namespaces to list DaemonSets in, or None for all of them."""
    if targets is None:
        return sorted(options.plugin_namespaces) or None
    if all(t.namespace for t in targets):
        return sorted({t.namespace for t in targets if t.namespace})
    return None


def select_daemonsets(
    daemonsets: Iterable[Mapping[str, Any]], targets: Sequence[DaemonSetTarget] | None, options: FleetOptions
) -> tuple[list[Mapping[str, Any]], list[dict[str, Any]]]:
    """The DaemonSets to check, and a finding for each target that matched none."""
    listed = list(daemonsets)
    if targets is None:
        return [d for d in listed if is_plugin_daemonset(d, options)], []
    selected: dict[str, Mapping[str, Any]] = {}
    missing = []
    for target in targets:
        matched = [d for d in listed if target_matches(target, d)]
        if not matched:
            missing.append(missing_target_finding(target))
        selected.update((namespaced_name(d), d) for d in matched)
    return list(selected.values()), missing


def missing_target_finding(target: DaemonSetTarget) -> dict[str, Any]:
    return found(KIND_DAEMONSET_MISSING, target.text, case="" if target.name else "selector")
