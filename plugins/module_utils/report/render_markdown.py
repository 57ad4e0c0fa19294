# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet report as Markdown, for pull requests and wikis. Every text that comes from a cluster is
escaped: it can neither break a table nor inject markup."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.report import text as shared

# Inline markup and table cells; block markup (#, -, +, >) only counts at a line's start, where no
# cluster text is ever put.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]|~])")


def md(value: Any) -> str:
    """Plain text safe in a Markdown table cell: HTML characters as entities, Markdown punctuation
    backslash-escaped, line breaks as spaces."""
    text = str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return " ".join(_MARKDOWN_SPECIAL.sub(r"\\\1", text).split())


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    numeric = [all(str(row[i]).isdigit() for row in rows) and bool(rows) for i in range(len(headers))]
    lines = [
        "| " + " | ".join(md(h) for h in headers) + " |",
        "|" + "|".join("---:" if n else "---" for n in numeric) + "|",
    ]
    lines += ["| " + " | ".join(md(cell) for cell in row) + " |" for row in rows]
    return lines


def _totals_rows(report: Mapping[str, Any]) -> list[list[Any]]:
    return [
        [
            c["name"],
            shared.cluster_status(c),
            shared.seconds(c["elapsed_seconds"]),
            c["totals"]["nodes"],
            *(c["totals"][k] for k in shared.COUNT_COLUMNS),
            len(c["problems"]),
            len(c["bypass"]),
        ]
        for c in report["clusters"]
    ]


def _cluster_section(cluster: Mapping[str, Any]) -> list[str]:
    lines = [
        "",
        f"## Cluster {md(cluster['name'])}",
        "",
        f"Status: {md(shared.cluster_status(cluster))}; time taken: {md(shared.seconds(cluster['elapsed_seconds']))}.",
    ]
    if cluster["models"]:
        lines += ["", "### Per model", ""]
        lines += table(
            ["model", "nodes", *shared.COUNT_COLUMNS],
            [[m["model"], m["nodes"], *(m[k] for k in shared.COUNT_COLUMNS)] for m in cluster["models"]],
        )
    if cluster["nodes"]:
        lines += ["", "### Nodes", ""]
        lines += table(shared.NODE_COLUMNS, [shared.node_cells(node) for node in cluster["nodes"]])
    if cluster.get("health") is not None:
        lines += ["", "### Health", "", md(shared.health_counts(cluster["health"])) + "."]
        rows = shared.health_rows(cluster["health"])
        lines += ["", *table(shared.HEALTH_COLUMNS, rows)] if rows else []
    if cluster.get("drivers") is not None:
        lines += ["", "### Drivers", "", md(shared.driver_counts(cluster["drivers"])) + "."]
        rows = shared.driver_rows(cluster["drivers"])
        lines += ["", *table(shared.DRIVER_COLUMNS, rows)] if rows else []
    if cluster["problems"]:
        lines += ["", "### Problems and remedies", ""]
        lines += table(shared.PROBLEM_COLUMNS, [shared.cells(p, shared.PROBLEM_COLUMNS) for p in cluster["problems"]])
    if cluster["bypass"]:
        lines += ["", "### GPU use that bypasses the scheduler", ""]
        lines += table(shared.BYPASS_COLUMNS, [shared.cells(b, shared.BYPASS_COLUMNS) for b in cluster["bypass"]])
    lines += placement_lines(cluster.get("placement"))
    lines += admission_lines(cluster.get("admission"))
    if cluster["notes"]:
        lines += ["", "### Notes", ""] + [f"- {md(note)}" for note in cluster["notes"]]
    return lines


def placement_lines(placement: Mapping[str, Any] | None) -> list[str]:
    """Where GPU work fits: the pods of each size that fit per pool, where, the GPUs stranded, and the
    pending GPU pods with why."""
    if not placement:
        return []
    lines = ["", "### Where GPU work fits", ""]
    if placement["pools"]:
        lines += table(shared.placement_pool_columns(placement), shared.placement_pool_rows(placement))
        lines += ["", "#### Where each size fits, and the GPUs stranded", ""]
        lines += table(shared.PLACEMENT_FIT_COLUMNS, shared.placement_fit_rows(placement))
    else:
        lines.append("No GPU nodes.")
    if placement["findings"]:
        lines += ["", "#### Stranded and fragmented GPUs", ""]
        rows = [shared.cells(f, shared.PLACEMENT_FINDING_COLUMNS) for f in placement["findings"]]
        lines += table(shared.PLACEMENT_FINDING_COLUMNS, rows)
    if placement["pending"]:
        lines += ["", "#### Pending GPU pods", ""]
        lines += table(shared.PENDING_COLUMNS, shared.pending_rows(placement["pending"]))
    if placement["notes"]:
        lines += ["", *(f"- {md(note)}" for note in placement["notes"])]
    return lines


def admission_lines(admission: Mapping[str, Any] | None) -> list[str]:
    """Which of the collection's admission policies are in force, or why that is unknown."""
    if not admission:
        return []
    lines = ["", "### Admission policies", ""]
    if admission.get("state") == "unknown":
        return lines + [f"Unknown: {md(admission.get('reason'))}"]
    rows = [shared.admission_cells(p) for p in admission.get("policies") or []]
    return lines + table(["policy", "in force", "actions", "deny"], rows)


def render_markdown(report: Mapping[str, Any]) -> str:
    totals = report["totals"]
    lines = [f"# {md(report['title'])}", ""]
    if report.get("generated_at"):
        lines += [f"Generated {md(report['generated_at'])}.", ""]
    summary = (
        f"{totals['clusters']} clusters ({totals['clusters_failed']} failed), {totals['nodes']} GPU nodes, "
        f"{totals['capacity']} GPUs, {totals['allocated']} allocated, {totals['free']} free, "
        f"{totals['problems']} problems, {totals['bypass_findings']} bypass findings."
    )
    lines.append(md(summary))
    lines += ["", md(f"Health: {shared.health_counts(totals['health'])}.")]
    if report["failed_clusters"]:
        lines += ["", "Failed: " + ", ".join(md(name) for name in report["failed_clusters"]) + "."]
    lines += ["", "## Clusters", ""]
    lines += table(
        ["cluster", "status", "time", "nodes", *shared.COUNT_COLUMNS, "problems", "bypass"], _totals_rows(report)
    )
    if report["models"]:
        lines += ["", "## Models", ""]
        lines += table(
            ["model", "clusters", "nodes", *shared.COUNT_COLUMNS],
            [[m["model"], m["clusters"], m["nodes"], *(m[k] for k in shared.COUNT_COLUMNS)] for m in report["models"]],
        )
    for cluster in report["clusters"]:
        lines += _cluster_section(cluster)
    return "\n".join(lines) + "\n"
