# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: fleet_summary
short_description: The gpu_fleet facts as a readable table per GPU model, then the problems
version_added: 1.0.0
description:
  - Turns the facts of M(kubegpu.scheduling.gpu_node_facts) into lines of text for C(ansible.builtin.debug).
options:
  _input:
    description: The C(gpu_fleet) facts.
    type: dict
    required: true
author:
  - kubegpu.scheduling contributors (@kubegpu)
"""

EXAMPLES = r"""
- name: Show the GPU fleet
  ansible.builtin.debug:
    msg: "{{ ansible_facts.gpu_fleet | kubegpu.scheduling.fleet_summary }}"
"""

RETURN = r"""
_value:
  description: The lines of the summary.
  type: list
  elements: str
"""

from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.summary import preflight_diagnosis, summary_lines  # noqa: E402


class FilterModule:
    def filters(self):
        return {"fleet_summary": summary_lines, "fleet_diagnosis": preflight_diagnosis}
