# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Placement's hits as findings of the one registry, in the shape the module returns."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.catalogue import KINDS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import Hit
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.results import legacy


def finding_dict(hit: Hit) -> dict[str, Any]:
    """A placement finding: the one shape, and its places (pool, pod) beside it as before."""
    finding = KINDS.finding(hit)
    return legacy(finding, **finding.where)


def with_findings(entries: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Entries (pending pods, manifest templates) with their hits turned into findings; the first is
    the sentence, `reason`."""
    out = []
    for entry in entries:
        findings = [finding_dict(h) for h in entry["hits"]]
        sentence = next((f for f in findings if f["kind"] not in _NOTES), findings[0] if findings else None)
        out.append(
            {
                **{k: v for k, v in entry.items() if k != "hits"},
                "reason": sentence["message"] if sentence else "",
                "remedy": sentence["remedy"] if sentence else "",
                "findings": findings,
            }
        )
    return out


_NOTES = ("placement.other_scheduler", "placement.not_modelled", "placement.claims_not_made")
