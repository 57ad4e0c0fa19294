# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet report's one data model, built from what each cluster's run returned: the fleet facts
(gpu_node_facts), the device-plugin verdicts (gpu_device_plugin_validate), the live pod audit
(gpu_pod_validate) and where GPU work fits (gpu_placement_info). The JSON, Markdown and HTML renderers all
read this model and nothing else."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.severity import severity_rank
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.health_table import HEALTH_STATUSES, HEALTHY
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.nodes import ADDRESS_TYPES, preferred_address
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError

SCHEMA = "kubegpu.scheduling/fleet-report/v1"
COUNTS = ("capacity", "allocatable", "allocated", "free", "unhealthy")
DRIVER_KEYS = ("version", "managed_by", "upgrade_state", "state_since", "pod_revision_current")
OK = "ok"
FAILED = "failed"
UNKNOWN_MODEL = "unknown"
SOURCES = ("fleet", "device_plugin", "pod_audit", "placement")
PENDING_TEXTS = ("resource", "reason", "remedy", "message", "scheduler_said")
PLACEMENT_FINDING_TEXTS = ("kind", "severity", "pool", "message", "remedy")
HEALTH_PROBLEM_TEXTS = ("kind", "severity", "problem", "reason", "remedy")


def _zero_counts() -> dict[str, int]:
    return {"nodes": 0, **dict.fromkeys(COUNTS, 0)}


def _counts(values: Mapping[str, Any]) -> dict[str, int]:
    return {key: int(values.get(key) or 0) for key in ("nodes", *COUNTS)}


def _add(total: dict[str, int], values: Mapping[str, int]) -> None:
    for key, value in values.items():
        total[key] = total.get(key, 0) + value


def plugin_state(fleet_node: Mapping[str, Any]) -> str:
    """How the node's GPUs reach the scheduler, in two words: the device-plugin pod's state, or the DRA
    kubelet plugin's on a node served by DRA alone."""
    sources = fleet_node.get("gpu_sources") or []
    if "dra" in sources and "device_plugin" not in sources:
        dra_ready = (fleet_node.get("dra") or {}).get("kubelet_plugin_ready")
        return "DRA Ready" if dra_ready else "DRA not Ready"
    if not fleet_node.get("device_plugin_pod"):
        return "none"
    return "Ready" if fleet_node.get("device_plugin_ready") else "not Ready"


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def node_location(fleet_node: Mapping[str, Any]) -> dict[str, Any]:
    """Where the node's host is, as the fleet facts carry it (gpu/nodes.py location_facts): the preferred
    address and all addresses, provider ID, zone, region and instance type; None where not carried."""
    addresses = [
        {"type": str(a["type"]), "address": str(a["address"])}
        for a in fleet_node.get("addresses") or []
        if isinstance(a, Mapping) and "type" in a and "address" in a
    ]
    return {
        "address": preferred_address(addresses, ADDRESS_TYPES),
        "addresses": addresses,
        **{key: _text_or_none(fleet_node.get(key)) for key in ("provider_id", "zone", "region", "instance_type")},
    }


def report_node(fleet_node: Mapping[str, Any], plugin_node: Mapping[str, Any] | None) -> dict[str, Any]:
    """One row of the per-node table; the device-plugin verdict adds its problem kinds."""
    kinds = [p.get("kind") for p in fleet_node.get("problems") or []]
    kinds += (plugin_node or {}).get("problems") or []
    return {
        "name": fleet_node.get("name"),
        "model": fleet_node.get("model") or UNKNOWN_MODEL,
        **{key: int(fleet_node.get(key) or 0) for key in COUNTS},
        "ready": bool(fleet_node.get("ready")),
        "schedulable": fleet_node.get("schedulable", True) is not False,
        "plugin": plugin_state(fleet_node),
        "health": _text_or_none(_as_mapping(fleet_node.get("health")).get("status")),
        "plugin_pod": fleet_node.get("device_plugin_pod"),
        "gpu_sources": list(fleet_node.get("gpu_sources") or []),
        "problems": sorted({str(kind) for kind in kinds if kind}),
        **node_location(fleet_node),
    }


def report_drivers(fleet: Mapping[str, Any]) -> dict[str, Any] | None:
    """GPU nodes per driver version and per upgrade state, and the nodes whose upgrade is under way or
    failed or whose driver pod is not on its DaemonSet's current template; None when the facts carry no
    driver view (a collection older than it)."""
    viewed = [n for n in fleet.get("nodes") or [] if isinstance(n, Mapping) and isinstance(n.get("driver"), Mapping)]
    if not viewed:
        return None
    versions: dict[str, int] = {}
    states: dict[str, int] = {}
    attention = []
    for node in viewed:
        driver = node["driver"]
        version, state = str(driver.get("version") or "unknown"), driver.get("upgrade_state")
        versions[version] = versions.get(version, 0) + 1
        states[str(state or "none")] = states.get(str(state or "none"), 0) + 1
        if (state and state != "upgrade-done") or driver.get("pod_revision_current") is False:
            attention.append({"node": str(node.get("name") or ""), **{k: driver.get(k) for k in DRIVER_KEYS}})
    return {
        "versions": dict(sorted(versions.items())),
        "upgrade_states": dict(sorted(states.items())),
        "nodes": sorted(attention, key=lambda entry: entry["node"]),
    }


def report_health(fleet: Mapping[str, Any]) -> dict[str, Any] | None:
    """How many GPU nodes are healthy, degraded and failed, and the problems of those that are not healthy;
    None when the facts carry no health view (a collection older than it)."""
    judged = [n for n in fleet.get("nodes") or [] if isinstance(n, Mapping) and isinstance(n.get("health"), Mapping)]
    if not judged:
        return None
    counts = dict.fromkeys(HEALTH_STATUSES, 0)
    unhealthy = []
    for node in judged:
        status = str(node["health"].get("status") or "")
        if status in counts:
            counts[status] += 1
        if status != HEALTHY:
            problems = [
                _texts(p, HEALTH_PROBLEM_TEXTS) for p in node["health"].get("problems") or [] if isinstance(p, Mapping)
            ]
            unhealthy.append({"node": str(node.get("name") or ""), "status": status, "problems": problems})
    return {**counts, "nodes": sorted(unhealthy, key=_worst_first)}


def _worst_first(entry: Mapping[str, Any]) -> tuple[int, str]:
    """Failed nodes first, then degraded ones (a status not known last), each by name."""
    status = entry["status"]
    return (-HEALTH_STATUSES.index(status) if status in HEALTH_STATUSES else 0, entry["node"])


def _problem_key(problem: Mapping[str, Any]) -> tuple:
    return (severity_rank(problem.get("severity") or ""), problem.get("node") or "", problem.get("kind") or "")


def problem_row(finding: Mapping[str, Any], source: str, fleet_problem: Mapping[str, Any]) -> dict[str, Any]:
    """One row of the problems table, the one shape of both sources: a device-plugin finding (it
    carries severity, subject and remedy) with the fleet problem of the same node and kind, or a
    fleet problem alone (``finding`` empty)."""
    node = finding.get("node", fleet_problem.get("node"))
    subject = finding.get("subject") or (f"node {node}" if node else "cluster")
    return {
        "node": node,
        "kind": finding.get("kind") or fleet_problem.get("kind"),
        "severity": finding.get("severity"),
        "subject": subject,
        "problem": finding.get("problem") or fleet_problem.get("problem"),
        "reason": fleet_problem.get("reason"),
        "remedy": finding.get("remedy") or fleet_problem.get("remedy"),
        "source": source,
    }


def report_problems(fleet: Mapping[str, Any], plugin: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The device-plugin findings, and the fleet problems they do not already cover; a finding and a
    fleet problem of the same node and kind are one row with both texts."""
    fleet_problems = {(p.get("node"), p.get("kind")): p for p in fleet.get("problems") or []}
    rows = []
    for finding in plugin.get("findings") or []:
        matched = fleet_problems.pop((finding.get("node"), finding.get("kind")), {})
        rows.append(problem_row(finding, "device_plugin", matched))
    rows += [problem_row({}, "fleet", problem) for problem in fleet_problems.values()]
    return sorted(rows, key=_problem_key)


def report_bypass(audit: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The live audit's findings: GPU use the scheduler does not count."""
    return [
        {
            "rule": finding.get("rule"),
            "name": finding.get("name"),
            "severity": finding.get("severity"),
            "object": " ".join(
                filter(
                    None,
                    (
                        finding.get("kind"),
                        "/".join(filter(None, (finding.get("namespace"), finding.get("object_name")))),
                    ),
                )
            ),
            "container": finding.get("container"),
            "path": finding.get("path"),
            "message": finding.get("message"),
            "remedy": finding.get("remedy"),
        }
        for finding in audit.get("findings") or []
    ]


def _count(value: Any, where: str) -> int:
    """A count of the placement view; a value that is not one is named with where it is."""
    if value is None or value == "":
        return 0
    try:
        return int(value)
    except (TypeError, ValueError):
        raise OptionError(f"{where} must be a whole number, got {value!r}") from None


def _as_mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _per_size(values: Any, sizes: Iterable[int], where: str, keys: tuple[str, str]) -> dict[str, dict[str, Any]]:
    """Per size (its key as gpu_placement_info writes it, a string) of `values`, a total and its parts: the pods
    that fit and per node how many (`fits`), or the GPUs stranded and per reason how many (`stranded`)."""
    total, parts = keys
    out = {}
    for size in map(str, sizes):
        entry = _as_mapping(_as_mapping(values).get(size))
        out[size] = {
            total: _count(entry.get(total), f"{where}.{size}.{total}"),
            parts: {str(k): _count(v, f"{where}.{size}.{parts}") for k, v in _as_mapping(entry.get(parts)).items()},
        }
    return out


def placement_pool(pool: Mapping[str, Any], sizes: Iterable[int], where: str) -> dict[str, Any]:
    """One pool's (or the fleet's) row of the placement view, as gpu_placement_info returns it: per size the
    pods that fit and on which nodes, and the free GPUs stranded for that size with why."""
    sizes = tuple(sizes)
    return {
        "pool": str(pool.get("pool") or UNKNOWN_MODEL),
        **{key: _count(pool.get(key), f"{where}.{key}") for key in ("nodes", "gpus_free", "withdrawn", "largest")},
        "fits": _per_size(pool.get("fits"), sizes, f"{where}.fits", ("pods", "nodes")),
        "stranded": _per_size(pool.get("stranded"), sizes, f"{where}.stranded", ("gpus", "by_reason")),
    }


def _texts(entry: Mapping[str, Any], keys: Iterable[str]) -> dict[str, str | None]:
    return {key: None if entry.get(key) in (None, "") else str(entry.get(key)) for key in keys}


def report_placement(result: Mapping[str, Any], where: str) -> dict[str, Any] | None:
    """Where GPU work fits: gpu_placement_info's registered result (its `placement`) or the view itself (as
    gpu_cluster_info returns it); None when the cluster's run made none."""
    view = result["placement"] if isinstance(result.get("placement"), Mapping) else result
    if not view:
        return None
    sizes = sorted({_count(size, f"{where}.sizes") for size in view.get("sizes") or []})
    pending = [p for p in view.get("pending") or [] if isinstance(p, Mapping)]
    return {
        "sizes": sizes,
        "resource": str(view.get("resource") or ""),
        "pools": [
            placement_pool(pool, sizes, f"{where}.pools[{index}]")
            for index, pool in enumerate(view.get("pools") or [])
            if isinstance(pool, Mapping)
        ],
        "fleet": placement_pool({"pool": "all", **_as_mapping(view.get("fleet"))}, sizes, f"{where}.fleet"),
        "pending": [
            {
                "pod": str(entry.get("pod") or ""),
                "gpus": _count(entry.get("gpus"), f"{where}.pending.gpus"),
                **_texts(entry, PENDING_TEXTS),
            }
            for entry in pending
        ],
        "findings": [
            _texts(finding, PLACEMENT_FINDING_TEXTS)
            for finding in view.get("findings") or []
            if isinstance(finding, Mapping)
        ],
        "notes": [str(note) for note in view.get("notes") or []],
    }


def _models(nodes: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    models: dict[str, dict[str, int]] = {}
    for node in nodes:
        _add(models.setdefault(node["model"], _zero_counts()), {"nodes": 1, **{key: node[key] for key in COUNTS}})
    return models


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    """A module result; a failed or skipped task's result (or none) counts as no result."""
    if value is None or value == "":
        return {}
    if not isinstance(value, Mapping):
        raise OptionError(f"{where} must be a module result (a dict), not {type(value).__name__}")
    return {} if value.get("failed") or value.get("skipped") else value


def _fleet_facts(result: Mapping[str, Any]) -> Mapping[str, Any]:
    """The facts in gpu_node_facts' registered result (its `ansible_facts.gpu_fleet`), or the facts themselves."""
    facts = result.get("ansible_facts")
    if isinstance(facts, Mapping) and isinstance(facts.get("gpu_fleet"), Mapping):
        return dict(facts["gpu_fleet"])
    return result


def _error(raw: Mapping[str, Any], fleet: Mapping[str, Any], where: str) -> dict[str, Any] | None:
    error = raw.get("error")
    if isinstance(error, Mapping):
        return {"task": error.get("task"), "message": str(error.get("message") or error.get("msg") or "failed")}
    if error:
        return {"task": None, "message": str(error)}
    if not fleet:
        return {"task": None, "message": f"no fleet facts were gathered ({where})"}
    return None


def report_cluster(raw: Mapping[str, Any], where: str) -> dict[str, Any]:
    """One cluster of the report, from its run's results (`fleet`, `device_plugin`, `pod_audit`), its
    `error` when a step failed, and `elapsed_seconds`."""
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise OptionError(f"{where}.name must be a non-empty string, got {name!r}")
    results = {source: _mapping(raw.get(source), f"{where}.{source}") for source in SOURCES}
    fleet, plugin, audit = _fleet_facts(results["fleet"]), results["device_plugin"], results["pod_audit"]
    plugin_nodes = {node.get("name"): node for node in plugin.get("nodes") or []}
    nodes = [report_node(node, plugin_nodes.get(node.get("name"))) for node in fleet.get("nodes") or []]
    elapsed = raw.get("elapsed_seconds")
    if elapsed is not None and not isinstance(elapsed, (int, float)):
        try:
            elapsed = float(elapsed)
        except ValueError:
            raise OptionError(f"{where}.elapsed_seconds must be a number, got {elapsed!r}") from None
    error = _error(raw, fleet, where)
    plugin_counts = plugin.get("counts") or {}
    return {
        "name": name,
        "status": FAILED if error else OK,
        "error": error,
        "elapsed_seconds": None if elapsed is None else round(float(elapsed), 2),
        "totals": _counts(fleet.get("totals") or {}) if fleet else _zero_counts(),
        "models": [{"model": model, **counts} for model, counts in sorted(_models(nodes).items())],
        "nodes": sorted(nodes, key=lambda node: str(node["name"])),
        "problems": report_problems(fleet, plugin),
        "health": report_health(fleet),
        "drivers": report_drivers(fleet),
        "device_plugin": {
            "checked": bool(plugin),
            "healthy": plugin.get("healthy") if plugin else None,
            "findings": {severity: int(plugin_counts.get(severity) or 0) for severity in ("error", "warning", "info")},
        },
        "bypass": report_bypass(audit),
        "pod_audit": {
            "checked": bool(audit),
            "objects_checked": int((audit.get("summary") or {}).get("objects_checked") or 0),
        },
        # gpu_pod_validate's reading of the admission policies (admission/plan.py), as it returned it.
        "admission": dict(audit["admission"]) if isinstance(audit.get("admission"), Mapping) else None,
        "notes": [str(note) for note in (*(fleet.get("notes") or []), *(audit.get("notes") or []))],
        "placement": report_placement(results["placement"], f"{where}.placement"),
    }


def build_report(clusters: Any, title: str = "GPU fleet report", generated_at: str | None = None) -> dict[str, Any]:
    """The report of every cluster: fleet totals, totals per model over all clusters, and each
    cluster's entry. Clusters keep the order given."""
    if not isinstance(clusters, list):
        raise OptionError(f"clusters must be a list of cluster results, not {type(clusters).__name__}")
    entries = []
    for index, raw in enumerate(clusters):
        entries.append(report_cluster(_mapping(raw, f"clusters[{index}]"), f"clusters[{index}]"))
    names = [entry["name"] for entry in entries]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise OptionError(f"clusters: each cluster needs its own name; repeated: {', '.join(duplicates)}")
    totals = _zero_counts()
    models: dict[str, dict[str, int]] = {}
    for entry in entries:
        _add(totals, entry["totals"])
        for row in entry["models"]:
            counts = {"clusters": 1, **{key: row[key] for key in ("nodes", *COUNTS)}}
            _add(models.setdefault(row["model"], {"clusters": 0, **_zero_counts()}), counts)
    failed = [entry["name"] for entry in entries if entry["status"] == FAILED]
    judged = [entry["health"] for entry in entries if entry["health"] is not None]
    health = {status: sum(h.get(status, 0) for h in judged) for status in HEALTH_STATUSES} if judged else None
    return {
        "schema": SCHEMA,
        "title": title,
        "generated_at": generated_at,
        "totals": {
            "clusters": len(entries),
            "clusters_failed": len(failed),
            **totals,
            "problems": sum(len(entry["problems"]) for entry in entries),
            "bypass_findings": sum(len(entry["bypass"]) for entry in entries),
            "health": health,
        },
        "models": [{"model": model, **counts} for model, counts in sorted(models.items())],
        "failed_clusters": failed,
        "clusters": entries,
    }
