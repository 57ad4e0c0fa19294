# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_cluster_info
short_description: Read one cluster for the GPU fleet report in one run
version_added: 1.0.0
description:
  - One cluster's part of the fleet report (M(kubegpu.scheduling.gpu_fleet_report),
    C(playbooks/fleet_report.yml)) from one module run and one read of the cluster - the fleet facts of
    M(kubegpu.scheduling.gpu_node_facts), the device-plugin check of
    M(kubegpu.scheduling.gpu_device_plugin_validate) (as with C(fail_on=never)) and the live pod audit of
    M(kubegpu.scheduling.gpu_pod_validate) (as with C(live=true, fail_on=never)), each with those modules'
    defaults.
  - With O(placement) (the default), also where GPU work fits, as M(kubegpu.scheduling.gpu_placement_info) finds it
    with its defaults (and O(placement_pool_label_keys)) - per pool, for 1, 2, 4 and 8 GPUs per pod, how many such
    pods fit now and on which nodes, the largest number of GPUs one pod gets on one node and the free GPUs stranded,
    with why; and each pending GPU pod with the reason in one sentence and its remedy. It reads nothing more - the
    nodes, the unfinished pods and the DRA objects are the lists the fleet facts read.
  - Each collection the checks read (nodes, pods, DaemonSets, DRA objects) is listed once, across all
    namespaces, and each check's lists are answered from it (namespace, label selector and the active-pods
    selector applied as the API server applies them).
  - Returns what the report reads of the results and no more (no pod lists, no DRA device lists, no
    text reports, no per-node placement view); for the full results run the modules themselves.
  - When a step fails, the module fails with its message, names the step in RV(step) and returns the results
    of the steps before it, which the report shows with the error.
author:
  - kubegpu.scheduling contributors (@kubegpu)
extends_documentation_fragment:
  - kubegpu.scheduling.options.prometheus
  - kubegpu.scheduling.options.driver_upgrade
  - kubegpu.scheduling.read_only
  - kubegpu.scheduling.connection
options:
  placement:
    description:
      - Also work out where GPU work fits (RV(placement)), from the lists already read.
      - Costs no API request; its time is the projection of the nodes and pods and the view, a part of the fleet
        facts' own that C(bench/bench_cluster_read.py) measures.
    type: bool
    default: true
  placement_pool_label_keys:
    description:
      - Node labels that split each model's nodes into pools for RV(placement) (a node pool, a zone), as
        O(kubegpu.scheduling.gpu_placement_info#module:pool_label_keys).
    type: list
    elements: str
    default: []
requirements:
  - kubernetes
  - PyYAML
"""

EXAMPLES = r"""
- name: Read the cluster for the report
  kubegpu.scheduling.gpu_cluster_info:
    kubeconfig: ~/.kube/config
  register: cluster_read

- name: Write the report of this cluster
  kubegpu.scheduling.gpu_fleet_report:
    dest: /tmp/gpu-report
    clusters:
      - name: prod
        fleet: "{{ cluster_read.fleet }}"
        device_plugin: "{{ cluster_read.device_plugin }}"
        pod_audit: "{{ cluster_read.pod_audit }}"
        placement: "{{ cluster_read.placement }}"

- name: Read the cluster, its placement view per node pool
  kubegpu.scheduling.gpu_cluster_info:
    placement_pool_label_keys: [cloud.google.com/gke-nodepool]
  register: cluster_read
"""

RETURN = r"""
fleet:
  description:
    - The fleet facts as the report reads them - per node C(name), C(model), C(capacity), C(allocatable),
      C(allocated), C(free), C(unhealthy), C(ready), C(schedulable), C(device_plugin_pod),
      C(device_plugin_ready), C(gpu_sources), C(dra.kubelet_plugin_ready), the C(kind) of each problem, the
      C(health) (C(status), and C(kind), C(severity), C(problem), C(reason), C(remedy) of each problem),
      C(addresses), C(provider_id), C(zone), C(region), C(instance_type) and the C(driver) (C(version),
      C(managed_by), C(driver_resource), C(upgrade_state), C(state_since), C(pod_revision_current)); the C(totals), the C(problems)
      (C(node), C(kind), C(problem), C(reason), C(remedy)) and the C(notes).
    - Each field as M(kubegpu.scheduling.gpu_node_facts) returns it.
  returned: when the fleet facts were read
  type: dict
device_plugin:
  description:
    - The device-plugin check as the report reads it - C(healthy), the C(counts) of findings by severity, per
      node its C(name) and C(problems), and the C(findings) (C(node), C(kind), C(severity), C(subject),
      C(problem), C(remedy)), as M(kubegpu.scheduling.gpu_device_plugin_validate) returns them.
  returned: when the device plugin was checked
  type: dict
pod_audit:
  description:
    - The live audit as the report reads it - the C(findings) (C(rule), C(name), C(severity), C(kind),
      C(namespace), C(object_name), C(container), C(path), C(message), C(remedy)), C(summary.objects_checked),
      C(admission) and the C(notes), as M(kubegpu.scheduling.gpu_pod_validate) returns them.
  returned: when the pods were audited
  type: dict
placement:
  description:
    - Where GPU work fits, as the report reads RV(kubegpu.scheduling.gpu_placement_info#module:placement) - C(sizes),
      C(resource), the C(pools) and the C(fleet) (C(pool), C(nodes), C(gpus_free), C(withdrawn),
      C(largest), C(fits) per size with C(pods) and C(nodes), node to count, and C(stranded) per size with C(gpus)
      and C(by_reason)), the C(pending) GPU pods (C(pod), C(gpus), C(resource), C(reason), C(remedy), C(message),
      C(scheduler_said)), the C(findings) (C(kind), C(severity), C(pool), C(message), C(remedy)) and the C(notes).
    - Each field as M(kubegpu.scheduling.gpu_placement_info) returns it with its defaults.
  returned: when O(placement) is true and the placement view was made
  type: dict
step:
  description: The step that failed, when one did.
  returned: failure
  type: str
  sample: Gather the GPU fleet facts
api_requests:
  description: The API requests the run made, all steps together (those of the steps done, when a step fails).
  returned: always
  type: int
elapsed_seconds:
  description: How long the read of the cluster took, from the module's start to its result (the time the report
    shows for the cluster).
  returned: always
  type: float
"""

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.admission.plan import enforcement_summary
from ansible_collections.kubegpu.scheduling.plugins.module_utils.admission.reads import read_enforcement
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.reads import read_cluster
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.targets import check_options
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.verdict import evaluate
from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.drivers import DriverRead, add_driver_view
from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.facts import summarise
from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.prometheus_reads import (
    prometheus_source,
    read_beside,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.reads import read_fleet
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.components import catalogue_from_option
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import DraObjects
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import options_from_params
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import NVIDIA_GPU, gpu_resource_matcher
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import KubegpuError, error_context
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.module import (
    api_module,
    errors_fail,
    module_client,
    require_library,
    with_connection_options,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.shared_lists import SharedLists
from ansible_collections.kubegpu.scheduling.plugins.module_utils.options.groups import (
    DRIVER_UPGRADE,
    PROMETHEUS,
    module_options,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.options import placement_options
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.reads import read_placement
from ansible_collections.kubegpu.scheduling.plugins.module_utils.report.inputs import (
    device_plugin_input,
    fleet_input,
    placement_input,
    pod_audit_input,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.checker import RuleConfig
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.manifests import HAS_YAML
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.reads import live_report
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.report import merge_reports, result_fields
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.rules import DEFAULT_ALLOW_ANNOTATION

# The steps, named as the report's error names the step that failed (the playbook's tasks of old).
FLEET_STEP = "Gather the GPU fleet facts"
DEVICE_PLUGIN_STEP = "Check the device plugin (cluster side)"
POD_AUDIT_STEP = "Audit the running pods for GPU use that bypasses the scheduler"
PLACEMENT_STEP = "Work out where GPU work fits"
DEFAULT_COMPONENTS = {"builtin": True, "extra": []}
PAGE_SIZE = 500


@dataclass
class Run:
    """What the steps share: the client whose lists are read once, the parameters, and the DRA
    objects the fleet facts read (placement weighs the same ones)."""

    client: KubeClient
    params: dict[str, Any]
    dra: DraObjects = field(default_factory=DraObjects)


def fleet(run: Run) -> dict[str, Any]:
    options = options_from_params(system_components=DEFAULT_COMPONENTS)
    source = prometheus_source(run.params["prometheus"]) if run.params["prometheus"] else None
    drivers = DriverRead(objects=run.params["driver_upgrade"]["read_objects"])
    (nodes, pods, plugins, run.dra), metrics = read_beside(
        source, lambda: read_fleet(run.client, options, None, None, PAGE_SIZE, drivers)
    )
    facts = summarise(nodes, pods, plugins, options, run.dra, metrics)
    add_driver_view(facts, drivers, time.time(), run.params["driver_upgrade"]["stuck_after"])
    return fleet_input(facts)


def device_plugin(run: Run) -> dict[str, Any]:
    options = check_options(NVIDIA_GPU, None)
    read = read_cluster(run.client, None, options)
    result = evaluate(read, options)
    return device_plugin_input(result)


def pod_audit(run: Run) -> dict[str, Any]:
    config = RuleConfig(
        gpu_resources=(),
        image_env={},
        allow_annotation=DEFAULT_ALLOW_ANNOTATION,
        skip_rules=frozenset(),
        components=catalogue_from_option(DEFAULT_COMPONENTS),
    )
    with error_context("live audit"):
        report = merge_reports([live_report(run.client, config, None)])
    admission = read_enforcement(run.client)
    report.notes.append(enforcement_summary(admission))
    return pod_audit_input({**result_fields(report), "notes": report.notes, "admission": admission})


def placement(run: Run) -> dict[str, Any]:
    """gpu_placement_info's view and pending pods with its defaults, from the lists the fleet facts read."""
    options = placement_options(pool_label_keys=run.params["placement_pool_label_keys"])
    is_gpu = gpu_resource_matcher([NVIDIA_GPU])
    _fleet, result = read_placement(run.client, options, is_gpu, lambda _client, _page_size: run.dra, PAGE_SIZE)
    return placement_input(result)


STEPS: tuple[tuple[str, str, Callable[[Run], dict[str, Any]]], ...] = (
    ("fleet", FLEET_STEP, fleet),
    ("device_plugin", DEVICE_PLUGIN_STEP, device_plugin),
    ("pod_audit", POD_AUDIT_STEP, pod_audit),
    ("placement", PLACEMENT_STEP, placement),
)


def argument_spec() -> dict[str, Any]:
    own = dict(
        placement={"type": "bool", "default": True},
        placement_pool_label_keys={"type": "list", "elements": "str", "default": [], "no_log": False},
    )
    return with_connection_options(module_options(own, (PROMETHEUS, DRIVER_UPGRADE)))


def read_steps(module: Any, began: float) -> dict[str, Any]:
    """Each step's part of the report; a failed step fails the task, naming it, with the parts done."""
    done: dict[str, Any] = {}
    run: Run | None = None
    steps = [step for step in STEPS if step[0] != "placement" or module.params["placement"]]
    for key, step, read in steps:
        try:
            run = run or Run(SharedLists(module_client(module)), module.params)
            done[key] = read(run)
        except KubegpuError as exc:
            elapsed = round(time.monotonic() - began, 3)
            requests = run.client.request_count if run else 0
            fields = {"status": exc.status, "step": step, "changed": False, "elapsed_seconds": elapsed, **done}
            fields["api_requests"] = requests
            raise KubegpuError(exc.message, exc.status, result=fields) from None
    requests = run.client.request_count if run else 0
    elapsed = round(time.monotonic() - began, 3)
    return {"changed": False, "api_requests": requests, "elapsed_seconds": elapsed, **done}


def main() -> None:
    began = time.monotonic()
    module = api_module(argument_spec())
    with errors_fail(module):
        require_library(HAS_YAML, "PyYAML")
        result = read_steps(module, began)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
