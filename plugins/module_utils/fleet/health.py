# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The health view of the fleet facts: per node its status and its problems as entries of the
finding model, and the count of healthy, degraded and failed nodes. Judged by gpu/health.py from
what the facts already read; nothing more is asked of the API server."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.catalogue import KINDS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.kinds.health import DEGRADED_CASE
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import Hit
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.results import fleet_problem
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.health import HealthProblem, judge_node, worst
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.health_table import (
    DEGRADED,
    HEALTH_STATUSES,
    HealthTable,
)


def health_problem(problem: HealthProblem) -> dict[str, Any]:
    """A health problem as gpu_node_facts returns it: a finding (an error where it leaves the node failed,
    a warning where degraded, or as its kind declares) with the health status it gives the node, ``status``:
    degraded, failed, or unknown where a source that should judge the node could not."""
    degraded = problem.severity == DEGRADED and DEGRADED_CASE in KINDS[problem.kind].cases
    case = DEGRADED_CASE if degraded else ""
    return {**fleet_problem(KINDS.finding(Hit(problem.kind, problem.fields, case=case))), "status": problem.severity}


def node_health(node: Mapping[str, Any], facts: Mapping[str, Any], table: HealthTable) -> dict[str, Any]:
    """A node's ``health``: its status (healthy, degraded, failed, the worst of its problems) and the problems."""
    problems = judge_node(node, facts, table)
    return {"status": worst([p.severity for p in problems]), "problems": [health_problem(p) for p in problems]}


def with_problems(health: Mapping[str, Any], problems: Sequence[HealthProblem], said: Mapping[str, Any]) -> dict:
    """A node's ``health`` with more problems (those the metrics raise) and what that source said of
    the node (``metrics``); its status the worst of all its problems."""
    statuses = [p["status"] for p in health["problems"]] + [p.severity for p in problems]
    return {
        "status": worst(statuses),
        "problems": [*health["problems"], *(health_problem(p) for p in problems)],
        "metrics": dict(said),
    }


def health_counts(nodes: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """How many GPU nodes are healthy, degraded and failed."""
    counts = dict.fromkeys(HEALTH_STATUSES, 0)
    for facts in nodes:
        counts[facts["health"]["status"]] += 1
    return counts
