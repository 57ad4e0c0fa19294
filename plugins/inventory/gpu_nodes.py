# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: gpu_nodes
short_description: The GPU nodes of one or more Kubernetes clusters as hosts
version_added: 1.0.0
description:
  - Reads the GPU fleet of each cluster as M(kubegpu.scheduling.gpu_node_facts) does (one paginated list each of
    nodes, pods, DeviceClasses, ResourceSlices and ResourceClaims) and makes a host of every GPU node, device-plugin
    and DRA nodes alike, named after the node.
  - C(ansible_host) is the node's first address of the first type in O(address_preference) it publishes; a node
    with none of them gets no C(ansible_host).
  - "Host variables: C(kubegpu_cluster), C(kubegpu_node), C(kubegpu_model), C(kubegpu_capacity),
    C(kubegpu_allocatable), C(kubegpu_allocated), C(kubegpu_free), C(kubegpu_gpu_sources), C(kubegpu_problems)
    (the kinds of the node's problems), C(kubegpu_addresses), C(kubegpu_provider_id), C(kubegpu_zone),
    C(kubegpu_region) and C(kubegpu_instance_type), each as M(kubegpu.scheduling.gpu_node_facts) reports it."
  - "Groups: C(kubegpu_gpu_nodes) (every host), C(kubegpu_model_<model>) (C(kubegpu_model_unknown) when no label
    or device names one), C(kubegpu_cluster_<cluster>) and C(kubegpu_problem_<kind>). Names are lower case, and
    every character but letters, digits and C(_) becomes C(_)."
  - The playbook C(kubegpu.scheduling.device_plugin_check) checks the driver on the hosts of C(kubegpu_gpu_nodes)
    when the inventory has no C(gpu_hosts) group. It reads the API of one cluster, the one its connection names;
    over several clusters, run it once per cluster with C(-e device_plugin_check_inventory_host_group=kubegpu_cluster_<cluster>).
  - The connection options (O(kubeconfig), O(context), O(host), O(api_key), O(validate_certs) and the others below)
    are those of the modules, and the defaults of every entry of O(clusters).
  - A cluster that cannot be read is an error naming it when O(strict=true); otherwise a warning, and the other
    clusters are still inventoried.
  - A node whose name a host of an earlier cluster already has is left out, with a warning.
  - The source file's name must end in C(.kubegpu.yml) or C(.kubegpu.yaml).
author:
  - kubegpu.scheduling contributors (@kubegpu)
extends_documentation_fragment:
  - constructed
  - inventory_cache
  - kubegpu.scheduling.connection
  - kubegpu.scheduling.model_labels
options:
  plugin:
    description: The name of this plugin; it makes the file a source of it.
    required: true
    type: str
    choices: [kubegpu.scheduling.gpu_nodes, gpu_nodes]
  clusters:
    description:
      - The clusters to inventory, each a dictionary with a C(name) and any of the connection options, which
        override the top-level ones for that cluster.
      - The C(name) is the cluster's in host variables and groups; without it, the entry's C(context), else
        V(default). Names must differ.
      - Empty means one cluster, named V(default), with the top-level connection options.
    type: list
    elements: dict
    default: []
  address_preference:
    description:
      - The address types tried, in order, for C(ansible_host).
    type: list
    elements: str
    choices: [InternalIP, ExternalIP, Hostname]
    default: [InternalIP, ExternalIP, Hostname]
  resource_names:
    description:
      - Extended resources that count as whole GPUs, as M(kubegpu.scheduling.gpu_node_facts) counts them. MIG
        resources C(nvidia.com/mig-*) always count too.
    type: list
    elements: str
    default: [nvidia.com/gpu]
  label_selector:
    description:
      - Only consider nodes that match this label selector, for example V(nvidia.com/gpu.present=true).
    type: str
  device_plugin:
    description:
      - How the device plugin's pods are recognised, as in M(kubegpu.scheduling.gpu_node_facts); its defaults when
        not given.
    type: dict
    default: {}
  page_size:
    description:
      - Items per page of each list.
    type: int
    default: 500
"""

EXAMPLES = r"""
# local.kubegpu.yml: the GPU nodes of the cluster K8S_AUTH_KUBECONFIG (or ~/.kube/config) names
plugin: kubegpu.scheduling.gpu_nodes

---
# fleet.kubegpu.yml: two clusters, reached at their external addresses, with a group per zone
plugin: kubegpu.scheduling.gpu_nodes
kubeconfig: ~/.kube/config
clusters:
  - name: training
    context: training-admin
  - name: inference
    kubeconfig: ~/.kube/inference.yaml
address_preference: [ExternalIP, InternalIP]
keyed_groups:
  - key: kubegpu_zone
    prefix: zone
compose:
  ansible_user: "'ec2-user' if (kubegpu_provider_id or '').startswith('aws://') else 'ubuntu'"
strict: true
cache: true
cache_plugin: ansible.builtin.jsonfile
cache_connection: ~/.cache/kubegpu-inventory

# Then: ansible-inventory -i fleet.kubegpu.yml --graph
#       ansible-playbook -i fleet.kubegpu.yml kubegpu.scheduling.device_plugin_check
"""

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ansible.errors import AnsibleParserError
from ansible.plugins.inventory import BaseInventoryPlugin, Cacheable, Constructable
from ansible.utils.display import Display

from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.facts import summarise
from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.reads import read_fleet
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.models import UNKNOWN_MODEL
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.nodes import preferred_address
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import FleetOptions, options_from_params
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import client_from_params
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.config import AUTH_ARG_SPEC
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import KubegpuError, OptionError

display = Display()

ALL_GPU_NODES_GROUP = "kubegpu_gpu_nodes"
DEFAULT_CLUSTER_NAME = "default"
# Host variable -> the key of gpu_node_facts' node entry it copies.
HOST_VAR_FACTS = {
    "kubegpu_node": "name",
    "kubegpu_model": "model",
    "kubegpu_capacity": "capacity",
    "kubegpu_allocatable": "allocatable",
    "kubegpu_allocated": "allocated",
    "kubegpu_free": "free",
    "kubegpu_gpu_sources": "gpu_sources",
    "kubegpu_addresses": "addresses",
    "kubegpu_provider_id": "provider_id",
    "kubegpu_zone": "zone",
    "kubegpu_region": "region",
    "kubegpu_instance_type": "instance_type",
}
_CLUSTER_KEYS = frozenset(AUTH_ARG_SPEC) | {a for spec in AUTH_ARG_SPEC.values() for a in spec.get("aliases", ())}


def group_name(prefix: str, value: str) -> str:
    """`prefix_value` as a valid group name: lower case, anything but letters, digits and `_` made `_`."""
    cleaned = re.sub(r"[^a-z0-9_]+", "_", value.lower()).strip("_")
    return f"{prefix}_{cleaned or '_'}"


def host_vars(facts: Mapping[str, Any], cluster: str, address_preference: Sequence[str]) -> dict[str, Any]:
    """The variables of the host made of one node of gpu_node_facts, in cluster `cluster`."""
    found: dict[str, Any] = {"kubegpu_cluster": cluster}
    found.update({var: facts[key] for var, key in HOST_VAR_FACTS.items()})
    found["kubegpu_problems"] = sorted({p["kind"] for p in facts["problems"]})
    address = preferred_address(facts["addresses"], address_preference)
    if address is not None:
        found["ansible_host"] = address
    return found


def host_groups(variables: Mapping[str, Any]) -> list[str]:
    """The groups of a host, from its variables."""
    groups = [
        ALL_GPU_NODES_GROUP,
        group_name("kubegpu_model", variables["kubegpu_model"] or UNKNOWN_MODEL),
        group_name("kubegpu_cluster", variables["kubegpu_cluster"]),
    ]
    return groups + [group_name("kubegpu_problem", kind) for kind in variables["kubegpu_problems"]]


def cluster_entries(entries: object, defaults: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(name, connection options) per cluster: each entry's options over the top-level ones. Raises OptionError."""
    if entries is None or entries == []:
        return [(DEFAULT_CLUSTER_NAME, dict(defaults))]
    if not isinstance(entries, list):
        raise OptionError("clusters must be a list of dictionaries")
    clusters: list[tuple[str, dict[str, Any]]] = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            raise OptionError(f"clusters[{index}] must be a dictionary, not {type(entry).__name__}")
        unknown = sorted(str(key) for key in entry if key != "name" and key not in _CLUSTER_KEYS)
        if unknown:
            raise OptionError(
                f"clusters[{index}]: unknown option(s) {', '.join(unknown)}; known: name, {', '.join(AUTH_ARG_SPEC)}"
            )
        name = entry.get("name") or entry.get("context") or DEFAULT_CLUSTER_NAME
        if not isinstance(name, str):
            raise OptionError(f"clusters[{index}].name must be a string")
        if name in (known for known, _params in clusters):
            raise OptionError(f'clusters[{index}]: the name "{name}" is taken by an earlier cluster; give each a name')
        params = dict(defaults)
        params.update({key: value for key, value in entry.items() if key != "name" and value is not None})
        clusters.append((name, params))
    return clusters


def read_cluster_hosts(
    name: str,
    params: Mapping[str, Any],
    options: FleetOptions,
    label_selector: str | None,
    page_size: int,
    address_preference: Sequence[str],
) -> list[dict[str, Any]]:
    """The hosts of one cluster's GPU nodes, each {name, vars}."""
    client = client_from_params(params)
    nodes, pods, plugins, dra = read_fleet(client, options, label_selector, None, page_size)
    facts = summarise(nodes, pods, plugins, options, dra)
    return [{"name": node["name"], "vars": host_vars(node, name, address_preference)} for node in facts["nodes"]]


class InventoryModule(BaseInventoryPlugin, Constructable, Cacheable):
    NAME = "kubegpu.scheduling.gpu_nodes"

    def verify_file(self, path: str) -> bool:
        return bool(super().verify_file(path) and path.endswith((".kubegpu.yml", ".kubegpu.yaml")))

    def parse(self, inventory: Any, loader: Any, path: str, cache: bool = True) -> None:
        super().parse(inventory, loader, path, cache)
        self._read_config_data(path)
        cache_key = self.get_cache_key(path)
        use_cache = self.get_option("cache") and cache
        update_cache = self.get_option("cache") and not cache
        clusters = None
        if use_cache:
            try:
                clusters = self._cache[cache_key]
            except KeyError:
                update_cache = True
        if clusters is None:
            clusters = self._read_clusters()
        if update_cache:
            self._cache[cache_key] = clusters
        self._populate(clusters)

    def _read_clusters(self) -> list[dict[str, Any]]:
        strict = self.get_option("strict")
        try:
            entries = cluster_entries(self.get_option("clusters"), {key: self.get_option(key) for key in AUTH_ARG_SPEC})
            options = options_from_params(
                self.get_option("resource_names"), self.get_option("model_label_keys"), self.get_option("device_plugin")
            )
            page_size = self.get_option("page_size")
            if page_size < 1:
                raise OptionError(f"page_size must be at least 1, not {page_size}")
        except KubegpuError as exc:
            raise AnsibleParserError(f"{self.NAME}: {exc.message}") from None
        read = []
        for name, params in entries:
            try:
                hosts = read_cluster_hosts(
                    name,
                    params,
                    options,
                    self.get_option("label_selector"),
                    page_size,
                    self.get_option("address_preference"),
                )
            except KubegpuError as exc:
                message = f'{self.NAME}: cluster "{name}" cannot be read: {exc.message}'
                if strict:
                    raise AnsibleParserError(message) from None
                display.warning(f"{message}; its GPU nodes are left out")
                continue
            read.append({"cluster": name, "hosts": hosts})
        return read

    def _populate(self, clusters: list[dict[str, Any]]) -> None:
        strict = self.get_option("strict")
        owner: dict[str, str] = {}
        for cluster in clusters:
            for host in cluster["hosts"]:
                name, variables = host["name"], host["vars"]
                if name in owner:
                    display.warning(
                        f'{self.NAME}: node {name} of cluster "{cluster["cluster"]}" is left out: '
                        f'cluster "{owner[name]}" has a node of that name'
                    )
                    continue
                owner[name] = cluster["cluster"]
                self.inventory.add_host(name)
                for group in host_groups(variables):
                    self.inventory.add_group(group)
                    self.inventory.add_child(group, name)
                for key, value in variables.items():
                    self.inventory.set_variable(name, key, value)
                self._set_composite_vars(self.get_option("compose"), variables, name, strict=strict)
                self._add_host_to_composed_groups(self.get_option("groups"), variables, name, strict=strict)
                self._add_host_to_keyed_groups(self.get_option("keyed_groups"), variables, name, strict=strict)
