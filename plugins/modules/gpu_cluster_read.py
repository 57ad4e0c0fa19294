# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_cluster_read
short_description: Read one cluster for the GPU fleet report in one run
version_added: 1.0.0
description:
  - One cluster's part of the fleet report (M(kubegpu.scheduling.gpu_fleet_report),
    C(playbooks/fleet_report.yml)) from one module run and one read of the cluster - the fleet facts of
    M(kubegpu.scheduling.gpu_node_facts), the device-plugin check of
    M(kubegpu.scheduling.gpu_device_plugin_check) (as with C(report_only=true)) and the live pod audit of
    M(kubegpu.scheduling.gpu_pod_validate) (as with C(live=true, fail_on=never)), each with those modules'
    defaults.
  - Each collection the three read (nodes, pods, DaemonSets, DRA objects) is listed once, across all
    namespaces, and each check's lists are answered from it (namespace, label selector and the active-pods
    selector applied as the API server applies them).
  - Returns what the report reads of the three results and no more (no pod lists, no DRA device lists, no
    text reports); for the full results run the three modules.
  - When a step fails, the module fails with its message, names the step in RV(step) and returns the results
    of the steps before it, which the report shows with the error.
author:
  - kubegpu.scheduling contributors (@kubegpu)
extends_documentation_fragment:
  - kubegpu.scheduling.read_only
  - kubegpu.scheduling.connection
requirements:
  - kubernetes
  - PyYAML
"""

EXAMPLES = r"""
- name: Read the cluster for the report
  kubegpu.scheduling.gpu_cluster_read:
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
"""

RETURN = r"""
fleet:
  description:
    - The fleet facts as the report reads them - per node C(name), C(model), C(capacity), C(allocatable),
      C(allocated), C(free), C(unhealthy), C(ready), C(schedulable), C(device_plugin_pod),
      C(device_plugin_ready), C(gpu_sources), C(dra.kubelet_plugin_ready), the C(kind) of each problem,
      C(addresses), C(provider_id), C(zone), C(region) and C(instance_type); the C(totals), the C(problems)
      (C(node), C(kind), C(problem), C(reason), C(remedy)) and the C(notes).
    - Each field as M(kubegpu.scheduling.gpu_node_facts) returns it.
  returned: when the fleet facts were read
  type: dict
device_plugin:
  description:
    - The device-plugin check as the report reads it - C(healthy), the C(counts) of findings by severity, per
      node its C(name) and C(problems), and the C(findings) (C(node), C(kind), C(severity), C(subject),
      C(problem), C(remedy)), as M(kubegpu.scheduling.gpu_device_plugin_check) returns them.
  returned: when the device plugin was checked
  type: dict
pod_audit:
  description:
    - The live audit as the report reads it - the C(findings) (C(rule), C(name), C(severity), C(kind),
      C(namespace), C(object_name), C(container), C(path), C(message), C(remedy)), C(summary.objects_checked),
      C(admission) and the C(notes), as M(kubegpu.scheduling.gpu_pod_validate) returns them.
  returned: when the pods were audited
  type: dict
step:
  description: The step that failed, when one did.
  returned: failure
  type: str
  sample: Gather the GPU fleet facts
api_requests:
  description: The API requests the run made, all steps together.
  returned: success
  type: int
elapsed_seconds:
  description: How long the read of the cluster took, from the module's start to its result (the time the report
    shows for the cluster).
  returned: always
  type: float
"""

import time
from collections.abc import Callable
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.admission.plan import enforcement_summary
from ansible_collections.kubegpu.scheduling.plugins.module_utils.admission.reads import read_enforcement
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.reads import read_cluster
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.targets import check_options
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.verdict import evaluate
from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.facts import summarise
from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.reads import read_fleet
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.components import catalogue_from_option
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import options_from_params
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import NVIDIA_GPU
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
from ansible_collections.kubegpu.scheduling.plugins.module_utils.report.inputs import (
    device_plugin_input,
    fleet_input,
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
DEFAULT_COMPONENTS = {"builtin": True, "extra": []}


def fleet(client: KubeClient) -> dict[str, Any]:
    options = options_from_params(system_components=DEFAULT_COMPONENTS)
    nodes, pods, plugins, dra = read_fleet(client, options, None, None, 500)
    return fleet_input(summarise(nodes, pods, plugins, options, dra))


def device_plugin(client: KubeClient) -> dict[str, Any]:
    options = check_options(NVIDIA_GPU, None)
    read = read_cluster(client, None, options)
    result = evaluate(read, options)
    return device_plugin_input(result)


def pod_audit(client: KubeClient) -> dict[str, Any]:
    config = RuleConfig(
        gpu_resources=(),
        image_env={},
        allow_annotation=DEFAULT_ALLOW_ANNOTATION,
        skip_rules=frozenset(),
        components=catalogue_from_option(DEFAULT_COMPONENTS),
    )
    with error_context("live audit"):
        report = merge_reports([live_report(client, config, None)])
    admission = read_enforcement(client)
    report.notes.append(enforcement_summary(admission))
    return pod_audit_input({**result_fields(report), "notes": report.notes, "admission": admission})


STEPS: tuple[tuple[str, str, Callable[[KubeClient], dict[str, Any]]], ...] = (
    ("fleet", FLEET_STEP, fleet),
    ("device_plugin", DEVICE_PLUGIN_STEP, device_plugin),
    ("pod_audit", POD_AUDIT_STEP, pod_audit),
)


def argument_spec() -> dict[str, Any]:
    return with_connection_options({})


def read_steps(module: Any, began: float) -> dict[str, Any]:
    """Each step's part of the report; a failed step fails the task, naming it, with the parts done."""
    done: dict[str, Any] = {}
    client: SharedLists | None = None
    for key, step, read in STEPS:
        try:
            client = client or SharedLists(module_client(module))
            done[key] = read(client)
        except KubegpuError as exc:
            elapsed = round(time.monotonic() - began, 3)
            fields = {"status": exc.status, "step": step, "changed": False, "elapsed_seconds": elapsed, **done}
            raise KubegpuError(exc.message, exc.status, result=fields) from None
    requests = client.request_count if client else 0
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
