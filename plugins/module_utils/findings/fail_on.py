# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a check's findings fail its task, as the `fail_on` option of every check says: the findings
of that severity or a more severe one do, and with `never` none does. The `report_only` option that
some checks took before `fail_on` is deprecated; `report_only: true` means `fail_on: never`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.severity import SEVERITIES, severity_rank
from ansible_collections.kubegpu.scheduling.plugins.module_utils.options.groups import ALIAS_REMOVAL, COLLECTION

NEVER = "never"

# The deprecated option, as a module's own option beside the fail_on group.
REPORT_ONLY_OPTION: Mapping[str, Any] = {
    "type": "bool",
    "removed_in_version": ALIAS_REMOVAL,
    "removed_from_collection": COLLECTION,
}


def effective_fail_on(params: Mapping[str, Any]) -> str:
    """The module's fail_on, `never` when the deprecated report_only is true."""
    return NEVER if params.get("report_only") else str(params["fail_on"])


def fails(severity: str, fail_on: str) -> bool:
    """Whether a finding of `severity` fails the task under `fail_on`."""
    if fail_on not in SEVERITIES:
        return False
    return severity_rank(severity) <= severity_rank(fail_on)
