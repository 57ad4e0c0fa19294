#!/usr/bin/python
# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_alert_rules
short_description: Prometheus alert rules for GPU faults, rendered from the collection's DCGM health table
description:
  - Renders Prometheus alerting rules for GPU faults from the same table of the DCGM exporter's health signals
    that the collection's health view reads (its metrics, how each is read, and the XID codes by class), and
    writes them to a rules file (O(dest)) or applies them to the cluster as a Prometheus Operator
    C(PrometheusRule) (C(monitoring.coreos.com/v1)).
  - Two groups. C(kubegpu-gpu-page) (labels C(severity=critical), C(tier=page)) holds what leaves a node
    failed, an XID of the table's failed class that changed within O(window) (48, 64, 74, 79, 95, 119, 120, 123,
    140), an increase of C(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL), C(DCGM_FI_DEV_ROW_REMAP_FAILURE), fewer GPUs in
    the exporter on a node than within O(count_lookback), and no exporter series from a node whose
    kube-state-metrics capacity has C(nvidia.com/gpu).
  - C(kubegpu-gpu-ticket) (labels C(severity=warning), C(tier=ticket)) holds what leaves it degraded, an XID of
    the degraded class (63, 92, 94) or one the table does not list, C(DCGM_FI_DEV_ROW_REMAP_PENDING),
    C(DCGM_FI_DEV_RETIRED_PENDING) and an increase of C(DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS).
  - An XID of the workload class (13, 31, 43, 45, 68) is in no rule. An XID is judged by its change within
    O(window), never by its value, since the exporter's last-XID gauge never resets.
  - Every alert carries C(node), the node's name from the exporter's C(Hostname) or C(hostname) label or the
    scrape config's C(kubernetes_node) or C(node), so that an Event-Driven Ansible rulebook or Alertmanager
    routes on it; C(kind), the health problem kind the health view reports; C(status); and the annotations
    C(summary), C(description) (naming the metric and its value) and C(runbook_url).
  - It owns only what it made. The C(PrometheusRule) carries the label
    C(app.kubernetes.io/managed-by=kubegpu.scheduling) and is applied with server-side apply and the field manager
    C(kubegpu-alert-rules), only when it changes; one of the same name without that label is refused and nothing
    is written. A file is written only when it is absent or begins with the module's header line, and only when its
    text changes; any other file is refused. O(state=absent) removes only the module's object or file.
version_added: 1.0.0
author:
  - kubegpu.scheduling contributors (@kubegpu)
extends_documentation_fragment:
  - kubegpu.scheduling.connection
attributes:
  check_mode:
    support: full
    description: Nothing is written; the result says what would change.
  diff_mode:
    support: full
    description: Shows the file's text, or the object's fields the module sets, before and after.
options:
  state:
    description:
      - V(present) writes the rules; V(absent) removes the module's file or C(PrometheusRule).
    type: str
    choices: [present, absent]
    default: present
  dest:
    description:
      - A file to write the rules to instead of applying them; the cluster is not contacted.
    type: path
  format:
    description:
      - With O(dest), what the file holds. V(rules), a Prometheus rules file (C(groups)) for C(rule_files);
        V(prometheus_rule), the C(PrometheusRule) object, for a GitOps repository.
    type: str
    choices: [rules, prometheus_rule]
    default: rules
  name:
    description:
      - The name of the C(PrometheusRule).
    type: str
    default: kubegpu-gpu-alerts
  namespace:
    description:
      - The namespace of the C(PrometheusRule). It must exist, and the Prometheus' C(ruleNamespaceSelector) must
        select it.
    type: str
    default: monitoring
  labels:
    description:
      - Labels of the C(PrometheusRule), those the Prometheus' C(ruleSelector) needs, for example
        C(release=kube-prometheus-stack) for the kube-prometheus-stack chart's default.
    type: dict
    default: {}
  window:
    description:
      - How far back an XID change or a counter increase is looked for (a Prometheus duration). An alert of it
        resolves this long after the event; it must be longer than O(page_for) and O(ticket_for).
    type: str
    default: 30m
  page_for:
    description:
      - How long a condition of the page tier must hold before its alert fires.
    type: str
    default: 2m
  ticket_for:
    description:
      - How long a condition of the ticket tier must hold before its alert fires.
    type: str
    default: 15m
  absent_for:
    description:
      - How long a GPU node must be without exporter series before C(GpuExporterAbsent) fires (an exporter's
        restart takes a while).
    type: str
    default: 10m
  count_lookback:
    description:
      - How far back a node's GPU count in the exporter is compared with its count now.
    type: str
    default: 1h
  runbook_base_url:
    description:
      - Where the collection's runbook pages are; each alert's C(runbook_url) is C(gpu-failure.md) under it.
        Point it at a copy of C(docs/runbooks/) of your own.
    type: str
    default: https://github.com/kubegpu/scheduling/blob/main/docs/runbooks
  record_window:
    description:
      - Also render the recording rules that the facts' read takes with O(kubegpu.scheduling.gpu_node_facts#module:prometheus.recorded),
        in a third group C(kubegpu-gpu-facts), for this window (O(kubegpu.scheduling.gpu_node_facts#module:prometheus.window),
        V(10m) by default). They keep, at every evaluation, each signal's bad GPUs, the GPUs per node and the age
        of their samples, so that the facts read a few thousand series on fleets of thousands of GPU nodes.
      - Unset, no recording rules.
    type: str
notes:
  - On the cluster, needs C(get), C(create), C(patch) and C(delete) on C(prometheusrules) (C(monitoring.coreos.com))
    in O(namespace), and the Prometheus Operator's CRDs; C(create) because the first server-side apply of an object
    creates it. The ClusterRole C(kubegpu-alert-rules) of C(rbac/kubegpu-writer.yaml) grants exactly these for the
    default O(name), bound with a RoleBinding in O(namespace). With O(dest), no cluster access.
  - C(GpuExporterAbsent) needs kube-state-metrics; without it, the rule is silent.
  - C(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL), C(DCGM_FI_DEV_ROW_REMAP_PENDING) and C(DCGM_FI_DEV_RETIRED_PENDING) are not
    among the exporter's default counters; their rules stay silent until they are collected (docs/alert-rules.md
    gives the counters-CSV lines).
requirements:
  - kubernetes >= 30.1.0
seealso:
  - name: The alert rules
    description: What each rule says, the tiers, routing on C(node), and the counters to turn on.
    link: https://github.com/kubegpu/scheduling/blob/main/docs/alert-rules.md
"""

EXAMPLES = r"""
- name: Apply the alert rules where kube-prometheus-stack's Prometheus picks them up
  kubegpu.scheduling.gpu_alert_rules:
    namespace: monitoring
    labels:
      release: kube-prometheus-stack

- name: Write a rules file for a Prometheus configured with rule_files
  kubegpu.scheduling.gpu_alert_rules:
    dest: /etc/prometheus/rules/kubegpu-gpu.yml
    window: 1h
    ticket_for: 30m

- name: Write the PrometheusRule for a GitOps repository
  kubegpu.scheduling.gpu_alert_rules:
    dest: "{{ playbook_dir }}/gitops/monitoring/kubegpu-gpu-alerts.yaml"
    format: prometheus_rule
    labels:
      release: kube-prometheus-stack

- name: Remove them
  kubegpu.scheduling.gpu_alert_rules:
    state: absent
"""

RETURN = r"""
alerts:
  description: The names of the alerts rendered, page tier first.
  returned: always
  type: list
  elements: str
  sample: [GpuXidFailed, GpuEccDbeVolTotalIncreased, GpuRowRemapFailure, GpuCountDropped, GpuExporterAbsent]
groups:
  description: The rule groups rendered, as a Prometheus rules file holds them.
  returned: always
  type: list
  elements: dict
object:
  description: The C(PrometheusRule), as C(PrometheusRule namespace/name).
  returned: without O(dest)
  type: str
dest:
  description: The file written, or removed.
  returned: with O(dest)
  type: str
changes:
  description: The object or file created, changed or removed (or that would be, in check mode).
  returned: always
  type: list
  elements: str
left_alone:
  description: With O(state=absent), the object or file of that name the module did not make, left as it is.
  returned: with O(state=absent)
  type: list
  elements: str
not_ours:
  description: The object or file of that name the module did not make, when the task fails on it.
  returned: when the task fails on them
  type: list
  elements: str
changed:
  description: Whether the object or file was created, changed or removed (or would be, in check mode).
  returned: always
  type: bool
writes:
  description: The write requests sent to the API server; 0 in check mode, with O(dest), and when nothing changes.
  returned: always
  type: int
api_requests:
  description: The API requests sent, reads and writes, retries included; 0 with O(dest).
  returned: always
  type: int
diff:
  description:
    - The file's text before and after, or the cluster's values of the fields the module sets and the module's;
      of what is removed, what it was.
    - Ansible's diff callback prints it and removes it from the result.
  returned: in diff mode
  type: list
  elements: dict
"""

from typing import Any  # noqa: E402

from ansible_collections.kubegpu.scheduling.plugins.module_utils.alert_rules import render  # noqa: E402
from ansible_collections.kubegpu.scheduling.plugins.module_utils.alert_rules.run import (  # noqa: E402
    FORMATS,
    RULES,
    run,
    to_file,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.module import (  # noqa: E402
    with_connection_options,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.module import run_write_module  # noqa: E402

DEFAULTS = render.AlertSettings()


def argument_spec() -> dict[str, Any]:
    return with_connection_options(
        dict(
            state=dict(type="str", choices=["present", "absent"], default="present"),
            dest=dict(type="path"),
            format=dict(type="str", choices=list(FORMATS), default=RULES),
            name=dict(type="str", default="kubegpu-gpu-alerts"),
            namespace=dict(type="str", default="monitoring"),
            labels=dict(type="dict", default={}),
            window=dict(type="str", default=DEFAULTS.window),
            page_for=dict(type="str", default=DEFAULTS.page_for),
            ticket_for=dict(type="str", default=DEFAULTS.ticket_for),
            absent_for=dict(type="str", default=DEFAULTS.absent_for),
            count_lookback=dict(type="str", default=DEFAULTS.count_lookback),
            runbook_base_url=dict(type="str", default=DEFAULTS.runbook_base_url),
            record_window=dict(type="str"),
        )
    )


def main() -> None:
    run_write_module(argument_spec(), run, offline=to_file)


if __name__ == "__main__":
    main()
