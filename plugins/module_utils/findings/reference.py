# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The reference of every finding kind, rendered from the registry: the tables of docs/findings.md.

``python -m ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.reference``
prints them; tests/unit/test_parity.py fails when docs/findings.md holds other tables.
"""

from __future__ import annotations

import sys

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.catalogue import KINDS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import (
    CHECKS,
    Kind,
    KindRegistry,
)

BEGIN = "<!-- kinds: generated from findings/catalogue.py -->"
END = "<!-- end of kinds -->"
CHECK_TITLES = {
    "validator": "Validator (`gpu_pod_validate`, `gpu_admission_policy`)",
    "device_plugin": "Device plugin and driver (`gpu_device_plugin_validate`)",
    "fleet": "Fleet facts (`gpu_node_facts`, `problems`)",
    "health": "Health view (`gpu_node_facts`, `health.problems`)",
    "placement": "Placement (`gpu_placement_info`)",
    "plugin_config": "Device-plugin config (`gpu_plugin_config_validate`, `scripts/gpu-plugin-config-validate`)",
    "plugin_deploy": "Device-plugin deployment (`gpu_device_plugin`)",
    "quarantine": "Node and device quarantine (`gpu_node_quarantine`, `gpu_device_quarantine`)",
    "release": "Release of quarantined nodes (`gpu_node_release`)",
}


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _row(kind: Kind, check: str) -> str:
    severities = [kind.severity] + [c.severity for c in kind.cases.values() if c.severity]
    also = [c for c in kind.checks if c != check]
    title = _cell(kind.title) + (f" (also {', '.join(also)})" if also else "")
    before = kind.name or (kind.id if kind.id != kind.finding_id else "")
    name = f" `{before}`" if before else ""
    return f"| `{kind.finding_id}`{name} | {' or '.join(dict.fromkeys(severities))} | {title} |"


def kinds_markdown(registry: KindRegistry = KINDS) -> str:
    """One table per check that has kinds: id (and name), severity (or severities), title."""
    lines = [BEGIN]
    for check in CHECKS:
        kinds = registry.of_check(check)
        if not kinds:
            continue
        lines += [
            "",
            f"### {CHECK_TITLES.get(check, check)}",
            "",
            "| id (name) | severity | title |",
            "| --- | --- | --- |",
        ]
        lines += [_row(kind, check) for kind in kinds]
    return "\n".join([*lines, "", END])


if __name__ == "__main__":
    sys.stdout.write(kinds_markdown() + "\n")
