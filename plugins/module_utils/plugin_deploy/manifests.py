# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The objects that deploy a release of NVIDIA's device plugin: its published DaemonSet (and GPU
Feature Discovery's, optionally) with the deployment's options, and the plugin's config as a
ConfigMap mounted as its --config-file. Pure: options in, plain dicts out.

Every object carries the collection's mark (write/owned.py's `marked`: the managed-by label and the
digest of what was rendered), so that it is told from anyone else's and a field dropped from the
rendering still changes it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.models import (
    is_valid_label_value,
    label_key_problem,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.managed import MANAGED_BY
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.placement import placement_of
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_deploy.releases import (
    DEFAULT_RELEASE,
    DEVICE_PLUGIN_CONTAINER,
    FEATURE_DISCOVERY_CONTAINER,
    RELEASES,
    Release,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.owned import digest, marked

DEFAULT_NAMESPACE = "kube-system"  # where NVIDIA's static manifest puts the plugin
# The label GPU Feature Discovery's own manifest selects GPU nodes by (its "forced" term), which the
# GPU Operator sets on every GPU node.
DEFAULT_NODE_SELECTOR = {"nvidia.com/gpu.present": "true"}
# The nodes whose GPUs NVIDIA's DRA driver hands out: its kubelet plugin runs where this label is
# "true" (the driver chart's kubeletPlugin.nodeSelector, as the local fleet sets it). A device
# plugin there would advertise the same GPUs a second time.
DEFAULT_DRA_NODE_LABEL = "nvidia.com/dra-kubelet-plugin"
DEFAULT_PRIORITY_CLASS = "system-node-critical"
DEFAULT_MAX_UNAVAILABLE = 1

CONFIG_MAP_NAME = "nvidia-device-plugin-config"
CONFIG_KEY = "config.yaml"
CONFIG_DIR = "/etc/nvidia-device-plugin"
CONFIG_VOLUME = "device-plugin-config"
CONFIG_FILE_ENV = "CONFIG_FILE"
# The plugin reads its config only when it starts: a new config must restart the pods.
CONFIG_DIGEST_ANNOTATION = "kubegpu.io/plugin-config-sha256"

_DNS_LABEL = re.compile(r"^[a-z0-9](?:[-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*$")
_PERCENT = re.compile(r"^(?:100|[1-9][0-9]?)%$")


@dataclass(frozen=True)
class DeployOptions:
    release: Release
    namespace: str = DEFAULT_NAMESPACE
    node_selector: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_NODE_SELECTOR))
    dra_node_label: str | None = DEFAULT_DRA_NODE_LABEL
    priority_class: str | None = DEFAULT_PRIORITY_CLASS
    max_unavailable: int | str = DEFAULT_MAX_UNAVAILABLE
    config: str | None = None  # the config file's text, validated before it gets here
    feature_discovery: bool = False


def _max_unavailable(value: object) -> int | str:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    if isinstance(value, str) and _PERCENT.match(value.strip()):
        return value.strip()
    raise OptionError(
        f"max_unavailable: {value!r} is neither a number of nodes (1 or more) nor a percentage (1% to 100%)"
    )


def _node_selector(value: object) -> dict[str, str]:
    if value is None:
        return dict(DEFAULT_NODE_SELECTOR)
    if not isinstance(value, Mapping) or not value:
        raise OptionError(f"node_selector must be a non-empty dictionary of label key to value, not {value!r}")
    selector = {}
    for key, label in value.items():
        problem = label_key_problem(key)
        if problem:
            raise OptionError(f"node_selector: {key!r} is not a valid label key: {problem}")
        text = str(label).lower() if isinstance(label, bool) else label
        if not isinstance(text, str) or not is_valid_label_value(text):
            raise OptionError(f"node_selector[{key!r}]: {label!r} is not a valid label value")
        selector[str(key)] = text
    return selector


def build_deploy_options(**params: Any) -> DeployOptions:
    """The options (the module's names: version, namespace, node_selector, dra_node_label,
    priority_class, max_unavailable, config, feature_discovery), checked: each bad one an OptionError
    that names it. A missing or None option takes its default."""
    given = {k: v for k, v in params.items() if v is not None}
    version = given.get("version", DEFAULT_RELEASE)
    if version not in RELEASES:
        raise OptionError(f"version: {version!r} is not a release this collection deploys ({', '.join(RELEASES)})")
    namespace = given.get("namespace", DEFAULT_NAMESPACE)
    if not isinstance(namespace, str) or len(namespace) > 63 or not _DNS_LABEL.match(namespace):
        raise OptionError(f"namespace: {namespace!r} is not a valid namespace name (a DNS label)")
    dra_label = given.get("dra_node_label", DEFAULT_DRA_NODE_LABEL) or None
    if dra_label is not None:
        problem = label_key_problem(dra_label)
        if problem:
            raise OptionError(f"dra_node_label: {dra_label!r} is not a valid label key: {problem}")
    priority = given.get("priority_class", DEFAULT_PRIORITY_CLASS) or None
    if priority is not None and (len(priority) > 253 or not _DNS_SUBDOMAIN.match(priority)):
        raise OptionError(f"priority_class: {priority!r} is not a valid PriorityClass name")
    return DeployOptions(
        release=RELEASES[version],
        namespace=namespace,
        node_selector=_node_selector(given.get("node_selector")),
        dra_node_label=dra_label,
        priority_class=priority,
        max_unavailable=_max_unavailable(given.get("max_unavailable", DEFAULT_MAX_UNAVAILABLE)),
        config=given.get("config"),
        feature_discovery=bool(given.get("feature_discovery", False)),
    )


def config_map(options: DeployOptions) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIG_MAP_NAME, "namespace": options.namespace},
        "data": {CONFIG_KEY: options.config or ""},
    }


def _keep_off_dra_nodes(pod_spec: dict[str, Any], label: str | None) -> None:
    """A NotIn on the DRA label in every required node-affinity term (the terms are alternatives)."""
    if label is None:
        return
    off_dra = {"key": label, "operator": "NotIn", "values": ["true"]}
    required = (
        pod_spec.setdefault("affinity", {})
        .setdefault("nodeAffinity", {})
        .setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    )
    terms = required.setdefault("nodeSelectorTerms", [])
    if not terms:
        terms.append({"matchExpressions": []})
    for term in terms:
        term.setdefault("matchExpressions", []).append(dict(off_dra))


def _with_config(pod_spec: dict[str, Any], template: dict[str, Any], container: str, config: str) -> None:
    template["metadata"].setdefault("annotations", {})[CONFIG_DIGEST_ANNOTATION] = digest(config)
    for entry in pod_spec["containers"]:
        if entry["name"] == container:
            entry.setdefault("env", []).append({"name": CONFIG_FILE_ENV, "value": f"{CONFIG_DIR}/{CONFIG_KEY}"})
            entry.setdefault("volumeMounts", []).append(
                {"name": CONFIG_VOLUME, "mountPath": CONFIG_DIR, "readOnly": True}
            )
    pod_spec.setdefault("volumes", []).append({"name": CONFIG_VOLUME, "configMap": {"name": CONFIG_MAP_NAME}})


def _deployed(published: dict[str, Any], container: str, options: DeployOptions) -> dict[str, Any]:
    """A published DaemonSet with the deployment's namespace, placement, priority, update strategy and config."""
    published["metadata"]["namespace"] = options.namespace
    published["metadata"].setdefault("labels", {})["app.kubernetes.io/version"] = options.release.version.lstrip("v")
    spec = published["spec"]
    spec["updateStrategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": options.max_unavailable}}
    template = spec["template"]
    template["metadata"]["labels"].update(MANAGED_BY)
    pod_spec = template["spec"]
    pod_spec["nodeSelector"] = dict(options.node_selector)
    _keep_off_dra_nodes(pod_spec, options.dra_node_label)
    if options.priority_class:
        pod_spec["priorityClassName"] = options.priority_class
    else:
        pod_spec.pop("priorityClassName", None)
    if options.config is not None:
        _with_config(pod_spec, template, container, options.config)
    return published


def device_plugin_daemonset(options: DeployOptions) -> dict[str, Any]:
    return marked(_deployed(options.release.device_plugin(), DEVICE_PLUGIN_CONTAINER, options))


def feature_discovery_daemonset(options: DeployOptions) -> dict[str, Any]:
    return marked(_deployed(options.release.feature_discovery(), FEATURE_DISCOVERY_CONTAINER, options))


def rendered_objects(options: DeployOptions) -> list[dict[str, Any]]:
    """What state=present applies, in order: the config before the DaemonSets that mount it."""
    objects = [marked(config_map(options))] if options.config is not None else []
    objects.append(device_plugin_daemonset(options))
    if options.feature_discovery:
        objects.append(feature_discovery_daemonset(options))
    return objects


def removable_objects(namespace: str) -> list[dict[str, Any]]:
    """Every object state=present may have made in a namespace, DaemonSets before the config they mount."""
    release = RELEASES[DEFAULT_RELEASE]
    made = [release.device_plugin(), release.feature_discovery(), config_map(DeployOptions(release, namespace))]
    return [
        {
            "apiVersion": o["apiVersion"],
            "kind": o["kind"],
            "metadata": {"name": o["metadata"]["name"], "namespace": namespace},
        }
        for o in made
    ]


def plugin_placement(options: DeployOptions) -> dict[str, Any]:
    """Which nodes the plugin's DaemonSet runs on (kube.placement's terms)."""
    return placement_of(device_plugin_daemonset(options)["spec"]["template"]["spec"])


def pod_selector(daemonset: Mapping[str, Any]) -> str:
    labels = daemonset["spec"]["selector"]["matchLabels"]
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
