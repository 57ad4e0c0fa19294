# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet table and the preflight diagnosis, as text for the play output."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_COLUMNS = ("model", "nodes", "gpus", "allocatable", "allocated", "free")


def _row(cells: tuple[str, ...], widths: list[int]) -> str:
    """The first column left-aligned, the numbers right-aligned."""
    return "  ".join(
        cell.ljust(width) if i == 0 else cell.rjust(width)
        for i, (cell, width) in enumerate(zip(cells, widths, strict=True))
    )


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [_row(row, widths) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def _dra_line(totals: Mapping[str, Any]) -> list[str]:
    dra = (totals.get("by_source") or {}).get("dra") or {}
    if not dra.get("capacity"):
        return []
    return [
        f"of which through DRA: {dra.get('capacity', 0)} GPUs, {dra.get('allocatable', 0)} allocatable, "
        f"{dra.get('allocated', 0)} allocated, {dra.get('free', 0)} free"
    ]


def _health_lines(facts: Mapping[str, Any]) -> list[str]:
    """The health counts, and each problem of the nodes that are not healthy; none for facts without them."""
    health = facts.get("health")
    if not isinstance(health, Mapping):
        return []
    statuses = (
        ("healthy", "unknown", "degraded", "failed") if health.get("unknown") else ("healthy", "degraded", "failed")
    )
    counts = ", ".join(f"{health.get(status, 0)} {status}" for status in statuses)
    lines = [f"health: {counts}"]
    for node in facts.get("nodes") or []:
        for problem in (node.get("health") or {}).get("problems") or []:
            lines.append(
                f"  {node.get('name')}: {problem.get('severity')}: {problem.get('problem')} ({problem.get('reason')})"
            )
    return lines


def summary_lines(facts: Mapping[str, Any]) -> list[str]:
    """A table per model (nodes, GPUs, allocatable, allocated, free), the DRA share, then every
    problem (those of no node under `cluster`), the health counts and each health problem, and the notes."""
    models = facts.get("models") or {}
    rows: list[tuple[str, ...]] = [_COLUMNS]
    for name in sorted(models):
        model = models[name]
        rows.append(
            (
                name,
                str(model.get("nodes", 0)),
                str(model.get("capacity", 0)),
                str(model.get("allocatable", 0)),
                str(model.get("allocated", 0)),
                str(model.get("free", 0)),
            )
        )
    totals = facts.get("totals") or {}
    rows.append(
        (
            "total",
            str(totals.get("nodes", 0)),
            str(totals.get("capacity", 0)),
            str(totals.get("allocatable", 0)),
            str(totals.get("allocated", 0)),
            str(totals.get("free", 0)),
        )
    )
    lines = ["GPU fleet", *_table(rows), *_dra_line(totals)]
    problems = facts.get("problems") or []
    lines.append(f"problems: {len(problems)}" if problems else "problems: none")
    lines += [f"  {p.get('node') or 'cluster'}: {p.get('problem')} ({p.get('reason')})" for p in problems]
    lines += _health_lines(facts)
    notes = facts.get("notes") or []
    lines += [f"note: {note}" for note in notes]
    return lines


def preflight_diagnosis(facts: Mapping[str, Any], resource_name: str = "nvidia.com/gpu") -> str:
    """Empty when some node exposes GPU capacity; else why not and what to check, as the ACK guide does."""
    if (facts.get("totals") or {}).get("capacity", 0) > 0:
        return ""
    without = facts.get("nodes_without_capacity") or []
    if not facts.get("nodes"):
        return (
            f"no node exposes {resource_name} capacity and no node looks like a GPU node (no GPU model, "
            "count or presence label, no GPU capacity): add GPU nodes, or label them (GPU Feature Discovery, "
            "ACK's node pool labels) so they can be found"
        )
    return (
        f"no node exposes {resource_name} capacity; GPU nodes without it: {', '.join(without)}. Check, on each: "
        "that the device-plugin pod runs there and is Ready (its DaemonSet's node selector matches the node's "
        "labels), that the NVIDIA driver is loaded (nvidia-smi works on the host), and the node's "
        "configuration (container runtime with the NVIDIA toolkit, ACK's ack.node.gpu.schedule=default)"
    )
