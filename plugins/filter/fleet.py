# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet filters; each is documented in the YAML file of its name beside this one."""

from __future__ import annotations

from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.summary import (
    preflight_diagnosis,
    summary_lines,
)


class FilterModule:
    def filters(self):
        return {"fleet_summary": summary_lines, "fleet_diagnosis": preflight_diagnosis}
