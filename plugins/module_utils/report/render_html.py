# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet report as one self-contained HTML page: inline CSS, inline SVG bar charts, no script and
no external asset (the page's Content-Security-Policy forbids loading any). Every text that comes from
a cluster is escaped. Table cells carry `data-field` so that tools (and the browser test) can read them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.report.text import (
    ADMISSION_COLUMNS,
    BYPASS_COLUMNS,
    COUNT_COLUMNS,
    DRIVER_COLUMNS,
    HEALTH_COLUMNS,
    NODE_COLUMNS,
    PENDING_COLUMNS,
    PLACEMENT_FINDING_COLUMNS,
    PLACEMENT_FIT_COLUMNS,
    PROBLEM_COLUMNS,
    admission_cells,
    cells,
    cluster_status,
    driver_counts,
    driver_rows,
    health_counts,
    health_rows,
    node_cells,
    pending_rows,
    placement_fit_rows,
    placement_pool_columns,
    placement_pool_rows,
    seconds,
)

CSP = "default-src 'none'; style-src 'unsafe-inline'"
STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:1.5rem;color:#1d2330;background:#fff}
h1{font-size:1.6rem}h2{font-size:1.3rem;margin-top:2rem;border-bottom:1px solid #d0d5dd}h3{font-size:1.05rem}
table{border-collapse:collapse;margin:.5rem 0 1rem;font-size:.9rem}
th,td{border:1px solid #d0d5dd;padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:#f2f4f7}td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.failed td{background:#fdecea}.ok{color:#067647}.failed{color:#b42318}
.muted{color:#667085}svg{display:block;margin:.5rem 0 1rem}
.legend span{display:inline-block;width:.8rem;height:.8rem;margin:0 .3rem 0 1rem;vertical-align:middle}
"""
BAR_COLOURS = {"capacity": "#d0d5dd", "allocatable": "#84caff", "allocated": "#1570ef"}


def h(value: Any) -> str:
    return escape(str(value), quote=True)


def _cell(field: str, value: Any) -> str:
    css = ' class="num"' if isinstance(value, int) or (isinstance(value, str) and value.isdigit()) else ""
    return f'<td data-field="{h(field)}"{css}>{h(value)}</td>'


def table(table_id: str, fields: Sequence[str], rows: Sequence[Sequence[Any]], row_classes: Sequence[str] = ()) -> str:
    head = "".join(f"<th>{h(field)}</th>" for field in fields)
    body = []
    for index, row in enumerate(rows):
        css = f' class="{h(row_classes[index])}"' if index < len(row_classes) and row_classes[index] else ""
        body.append(
            f"<tr{css}>" + "".join(_cell(field, value) for field, value in zip(fields, row, strict=True)) + "</tr>"
        )
    return f'<table id="{h(table_id)}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def titled_table(tag: str, heading: str, table_id: str, fields: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A heading (`tag`: h3, h4) and its table."""
    return f"<{tag}>{h(heading)}</{tag}>" + table(table_id, fields, rows)


def bar_chart(chart_id: str, rows: Sequence[tuple[str, Mapping[str, int]]]) -> str:
    """Capacity, allocatable and allocated GPUs per row as horizontal bars on one scale."""
    if not rows:
        return ""
    label_width, bar_width, row_height = 260, 420, 26
    scale = max([1, *(values["capacity"] for _label, values in rows)])
    height = row_height * len(rows) + 10
    parts = [
        f'<svg id="{h(chart_id)}" role="img" aria-label="GPU capacity against allocation" xmlns="http://www.w3.org/2000/svg" '
        f'width="{label_width + bar_width + 160}" height="{height}" font-size="12">'
    ]
    for index, (label, values) in enumerate(rows):
        y = 5 + index * row_height
        parts.append(f'<text x="{label_width - 8}" y="{y + 15}" text-anchor="end">{h(label)}</text>')
        for key, top, thickness in (("capacity", 0, 20), ("allocatable", 4, 12), ("allocated", 7, 6)):
            width = round(bar_width * values[key] / scale, 1)
            parts.append(
                f'<rect x="{label_width}" y="{y + top}" width="{width}" height="{thickness}" fill="{BAR_COLOURS[key]}">'
                f"<title>{h(label)}: {h(key)} {values[key]}</title></rect>"
            )
        summary = f"{values['allocated']} / {values['allocatable']} / {values['capacity']}"
        parts.append(f'<text x="{label_width + bar_width + 8}" y="{y + 15}">{h(summary)}</text>')
    parts.append("</svg>")
    legend = "".join(f'<span style="background:{colour}"></span>{h(key)}' for key, colour in BAR_COLOURS.items())
    return f'<p class="legend muted">allocated / allocatable / capacity:{legend}</p>' + "".join(parts)


def _cluster_section(index: int, cluster: Mapping[str, Any]) -> str:
    failed = cluster["status"] != "ok"
    parts = [
        f'<section id="cluster-{index}"><h2>Cluster {h(cluster["name"])}</h2>',
        f'<p class="{"failed" if failed else "ok"}">{h(cluster_status(cluster))}</p>',
        f'<p class="muted">time taken: {h(seconds(cluster["elapsed_seconds"]))}</p>',
    ]
    if cluster["models"]:
        parts.append(bar_chart(f"chart-cluster-{index}", [(m["model"], m) for m in cluster["models"]]))
    if cluster["nodes"]:
        parts.append("<h3>Nodes</h3>")
        parts.append(table(f"nodes-{index}", NODE_COLUMNS, [node_cells(node) for node in cluster["nodes"]]))
    if cluster.get("health") is not None:
        parts.append(f'<h3>Health</h3><p id="health-{index}">{h(health_counts(cluster["health"]))}.</p>')
        rows = health_rows(cluster["health"])
        if rows:
            parts.append(table(f"health-{index}-nodes", HEALTH_COLUMNS, rows))
    if cluster.get("drivers") is not None:
        parts.append(f'<h3>Drivers</h3><p id="drivers-{index}">{h(driver_counts(cluster["drivers"]))}.</p>')
        rows = driver_rows(cluster["drivers"])
        if rows:
            parts.append(table(f"drivers-{index}-nodes", DRIVER_COLUMNS, rows))
    if cluster["problems"]:
        rows = [cells(p, PROBLEM_COLUMNS) for p in cluster["problems"]]
        parts.append(titled_table("h3", "Problems and remedies", f"problems-{index}", PROBLEM_COLUMNS, rows))
    if cluster["bypass"]:
        rows = [cells(b, BYPASS_COLUMNS) for b in cluster["bypass"]]
        heading = "GPU use that bypasses the scheduler"
        parts.append(titled_table("h3", heading, f"bypass-{index}", BYPASS_COLUMNS, rows))
    parts.append(placement_section(index, cluster.get("placement")))
    parts.append(admission_section(index, cluster.get("admission")))
    if cluster["notes"]:
        parts.append("<h3>Notes</h3><ul>" + "".join(f"<li>{h(note)}</li>" for note in cluster["notes"]) + "</ul>")
    parts.append("</section>")
    return "".join(parts)


def placement_section(index: int, placement: Mapping[str, Any] | None) -> str:
    """Where GPU work fits: the pods of each size that fit per pool, where, the GPUs stranded, and the
    pending GPU pods with why."""
    if not placement:
        return ""
    parts = ["<h3>Where GPU work fits</h3>"]
    if placement["pools"]:
        parts.append(table(f"placement-{index}", placement_pool_columns(placement), placement_pool_rows(placement)))
        heading, rows = "Where each size fits, and the GPUs stranded", placement_fit_rows(placement)
        parts.append(titled_table("h4", heading, f"placement-fits-{index}", PLACEMENT_FIT_COLUMNS, rows))
    else:
        parts.append(f'<p id="placement-{index}" class="muted">No GPU nodes.</p>')
    if placement["findings"]:
        rows = [cells(f, PLACEMENT_FINDING_COLUMNS) for f in placement["findings"]]
        heading = "Stranded and fragmented GPUs"
        parts.append(titled_table("h4", heading, f"placement-findings-{index}", PLACEMENT_FINDING_COLUMNS, rows))
    if placement["pending"]:
        rows = pending_rows(placement["pending"])
        parts.append(titled_table("h4", "Pending GPU pods", f"pending-{index}", PENDING_COLUMNS, rows))
    if placement["notes"]:
        parts.append('<ul class="muted">' + "".join(f"<li>{h(note)}</li>" for note in placement["notes"]) + "</ul>")
    return "".join(parts)


def admission_section(index: int, admission: Mapping[str, Any] | None) -> str:
    """Which of the collection's admission policies are in force, or why that is unknown."""
    if not admission:
        return ""
    heading = "<h3>Admission policies</h3>"
    if admission.get("state") == "unknown":
        return f'{heading}<p id="admission-{index}" class="muted">unknown: {h(admission.get("reason"))}</p>'
    rows = [admission_cells(p) for p in admission.get("policies") or []]
    return heading + table(f"admission-{index}", ADMISSION_COLUMNS, rows)


def render_html(report: Mapping[str, Any]) -> str:
    totals = report["totals"]
    clusters = report["clusters"]
    summary = (
        f"{totals['clusters']} clusters ({totals['clusters_failed']} failed), {totals['nodes']} GPU nodes, "
        f"{totals['capacity']} GPUs, {totals['allocated']} allocated, {totals['free']} free, "
        f"{totals['problems']} problems, {totals['bypass_findings']} bypass findings."
    )
    cluster_rows = [
        [
            c["name"],
            cluster_status(c),
            seconds(c["elapsed_seconds"]),
            c["totals"]["nodes"],
            *(c["totals"][k] for k in COUNT_COLUMNS),
            len(c["problems"]),
            len(c["bypass"]),
        ]
        for c in clusters
    ]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{h(CSP)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{h(report['title'])}</title><style>{STYLE}</style></head><body>",
        f"<h1>{h(report['title'])}</h1>",
    ]
    if report.get("generated_at"):
        parts.append(f'<p class="muted">generated {h(report["generated_at"])}</p>')
    parts.append(f'<p id="summary">{h(summary)}</p>')
    parts.append(f'<p id="health">Health: {h(health_counts(totals["health"]))}.</p>')
    if report["failed_clusters"]:
        parts.append(f'<p class="failed">failed: {h(", ".join(report["failed_clusters"]))}</p>')
    parts.append("<h2>Clusters</h2>")
    parts.append(bar_chart("chart-clusters", [(c["name"], c["totals"]) for c in clusters]))
    parts.append(
        table(
            "clusters",
            ("cluster", "status", "time", "nodes", *COUNT_COLUMNS, "problems", "bypass"),
            cluster_rows,
            ["failed" if c["status"] != "ok" else "" for c in clusters],
        )
    )
    if report["models"]:
        parts.append("<h2>Models</h2>")
        parts.append(bar_chart("chart-models", [(m["model"], m) for m in report["models"]]))
        rows = [[m["model"], m["clusters"], m["nodes"], *(m[k] for k in COUNT_COLUMNS)] for m in report["models"]]
        parts.append(table("models", ("model", "clusters", "nodes", *COUNT_COLUMNS), rows))
    parts += [_cluster_section(index, cluster) for index, cluster in enumerate(clusters)]
    parts.append("</body></html>\n")
    return "\n".join(parts)
