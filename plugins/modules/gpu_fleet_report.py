# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_fleet_report
short_description: One GPU report for many clusters, as JSON, Markdown and a self-contained HTML page
version_added: 1.0.0
description:
  - Builds one report from the results of M(kubegpu.scheduling.gpu_node_facts), M(kubegpu.scheduling.gpu_device_plugin_validate),
    M(kubegpu.scheduling.gpu_pod_validate) (live) and M(kubegpu.scheduling.gpu_placement_info) gathered on each cluster (or
    of M(kubegpu.scheduling.gpu_cluster_info), which reads them all at once), and writes it in the forms asked for.
  - "The report holds: totals per cluster and per model (nodes, capacity, allocatable, allocated, free, unhealthy),
    each cluster's status (V(ok), or V(failed) with the task and message of its error) and time taken, a per-node table
    (model, the counts, the device-plugin state, the health status, the problem kinds, and where the host is: its
    preferred address, zone, instance type and provider ID, where the facts carry them; the JSON adds all its
    addresses and its region), the health view (how many GPU nodes are healthy, degraded and failed, per cluster and in all, and each problem of
    the nodes that are not healthy with its remedy; not judged for facts that carry no health view), the
    problems with their remedies (the device-plugin findings, and the fleet problems they do not cover), the GPU use
    that bypasses the scheduler (the live audit's findings), notes, and where GPU work fits (per pool, the pods of each
    size that fit and on which nodes, the largest that fits on one node, the free GPUs stranded with why, and the
    pending GPU pods with the reason in one sentence and its remedy; the Markdown and HTML forms name the first five
    nodes of each size, the JSON all of them)."
  - The JSON form follows the schema in C(docs/fleet-report.schema.json) (C(schema) V(kubegpu.scheduling/fleet-report/v1)).
    The Markdown form is for pull requests and wikis. The HTML page has no script and no external asset (its
    Content-Security-Policy allows none), with inline CSS and inline SVG bar charts of capacity against allocation.
  - Every text that comes from a cluster is escaped in the Markdown and HTML forms.
  - A file whose content would not change is not written; the task is changed when a file is written. With check
    mode nothing is written; with diff mode each file's change is shown.
  - Talks to no cluster; runs where the files are to be written, typically once on localhost with the results of
    every cluster from C(hostvars) (see C(playbooks/fleet_report.yml)).
author:
  - kubegpu.scheduling contributors (@kubegpu)
options:
  clusters:
    description:
      - One entry per cluster, in the order the report lists them.
      - C(name) (required, unique) names the cluster. C(fleet), C(device_plugin), C(pod_audit) and C(placement) are
        the registered results of the four modules (C(fleet) may also be the facts themselves, C(ansible_facts.gpu_fleet),
        and C(placement) the view itself, as M(kubegpu.scheduling.gpu_cluster_info) returns it); any may be
        missing, and a cluster without C(placement) has no placement section. C(error) is the cluster's failure, a
        string or a dict with
        C(task) and C(message); a cluster without fleet facts counts as failed too. C(elapsed_seconds) is the time
        its run took.
    type: list
    elements: dict
    required: true
  dest:
    description:
      - The folder the files are written to; created when missing.
    type: path
    required: true
  basename:
    description:
      - The files' name without extension; each form adds its own (C(.json), C(.md), C(.html)).
    type: str
    default: gpu-fleet-report
  formats:
    description:
      - The forms to write.
    type: list
    elements: str
    choices: [json, markdown, html]
    default: [json, markdown, html]
  title:
    description:
      - The report's title.
    type: str
    default: GPU fleet report
  generated_at:
    description:
      - When the report was made, shown as given (the playbook passes the time of the run). Left out when not
        set, so that a report of unchanged clusters is not rewritten.
    type: str
notes:
  - Supports check mode and diff mode.
"""

EXAMPLES = r"""
- name: Write the report of every cluster of the play
  kubegpu.scheduling.gpu_fleet_report:
    dest: reports
    clusters: >-
      {{ ansible_play_hosts_all | map('extract', hostvars, 'kubegpu_report_cluster') | list }}
  register: report

- name: One cluster's results, gathered in the same play
  kubegpu.scheduling.gpu_fleet_report:
    dest: /tmp/gpu-report
    formats: [markdown]
    clusters:
      - name: prod-eu
        fleet: "{{ fleet }}"
        device_plugin: "{{ plugin_check }}"
        pod_audit: "{{ audit }}"
        placement: "{{ placement }}"
"""

RETURN = r"""
files:
  description: The file of each form written or compared.
  returned: always
  type: dict
  sample: {json: reports/gpu-fleet-report.json, markdown: reports/gpu-fleet-report.md, html: reports/gpu-fleet-report.html}
written:
  description: The files whose content changed (written, or that would be in check mode).
  returned: always
  type: list
  elements: str
failed_clusters:
  description: The clusters that could not be read, in the order given.
  returned: always
  type: list
  elements: str
  sample: [prod-us]
totals:
  description: The fleet's totals, as in the report.
  returned: always
  type: dict
  sample: {clusters: 2, clusters_failed: 0, nodes: 13, capacity: 51, allocatable: 50, allocated: 9, free: 42, unhealthy: 1,
           problems: 12, bypass_findings: 4}
data:
  description:
    - The report's data model, as written to the JSON file (see C(docs/fleet-report.schema.json)).
    - Its readable form is the Markdown file.
  returned: always
  type: dict
report:
  description: Deprecated, removed in 2.0.0; the same data model as RV(data), read it there.
  returned: always
  type: dict
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.module import errors_fail
from ansible_collections.kubegpu.scheduling.plugins.module_utils.report.files import (
    FORMATS,
    current_text,
    report_files,
    write_text,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.report.model import build_report


def argument_spec() -> dict[str, Any]:
    return dict(
        clusters={"type": "list", "elements": "dict", "required": True},
        dest={"type": "path", "required": True},
        basename={"type": "str", "default": "gpu-fleet-report"},
        formats={"type": "list", "elements": "str", "choices": list(FORMATS), "default": list(FORMATS)},
        title={"type": "str", "default": "GPU fleet report"},
        generated_at={"type": "str"},
    )


def run(module: AnsibleModule) -> dict[str, Any]:
    params = module.params
    report = build_report(params["clusters"], params["title"], params["generated_at"])
    files = report_files(report, params["dest"], params["basename"], params["formats"])
    written, diffs = [], []
    for path, text in files.values():
        before = current_text(path)
        if before == text:
            continue
        written.append(path)
        diffs.append({"before": before or "", "after": text, "before_header": path, "after_header": path})
        if not module.check_mode:
            write_text(path, text)
    result: dict[str, Any] = {
        "changed": bool(written),
        "files": {form: path for form, (path, _text) in files.items()},
        "written": written,
        "failed_clusters": report["failed_clusters"],
        "totals": report["totals"],
        "data": report,
        "report": report,
    }
    if module._diff:  # pylint: disable=protected-access
        result["diff"] = diffs
    return result


def main() -> None:
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    with errors_fail(module):
        module.exit_json(**run(module))


if __name__ == "__main__":
    main()
