# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plan and the run of a device quarantine, through the functions they are handed: per device a
DeviceTaintRule of the collection's own, created with effect None so the device taint eviction
controller first reports what it selects, then switched to NoSchedule; the device's users evicted
through the Eviction API (write/evictions.py), never NoExecute, which deletes them past their
PodDisruptionBudgets; on release only the collection's rules on those devices deleted."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_quarantine import device
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_quarantine.reads import DeviceReads
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.catalogue import KINDS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.kinds import quarantine as kinds
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import Hit
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.results import plugin_finding
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.breaker import (
    DEFAULT_MAX_SHARE,
    Candidate,
    apply_breaker,
    count_pools,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.diff import diff_entry
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.evictions import (
    EvictionResult,
    PodEviction,
    eviction_entry,
    eviction_findings,
    eviction_lists,
    pod_eviction,
)

QUARANTINED_EFFECT = "NoSchedule"
STEP_CREATE = "create"
STEP_SWITCH = "switch"
STEP_NONE = "none"
STEP_FOREIGN = "foreign"
STEP_DELETE = "delete"
STEP_HELD = "held"


@dataclass(frozen=True)
class DevicePlan:
    ref: device.DeviceRef
    node: str
    rule: str
    step: str
    existing: Mapping[str, Any] | None
    users: tuple[PodEviction, ...] = ()
    # How the pods use the device: pod ref -> claim and through (claim / extended_resource).
    claims: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # Why the breaker held the device back (step held).
    held: str = ""


def _users(reads: DeviceReads, ref: device.DeviceRef, node: str) -> tuple[tuple[PodEviction, ...], dict[str, Any]]:
    pods = {p.ref: p for p in reads.pods if not p.terminating}
    users, claims = [], {}
    for user in device.device_users(reads.claims, ref):
        pod = pods.get(f"{user['namespace']}/{user['name']}")
        if pod is None or pod.ref in claims:
            continue
        users.append(
            PodEviction(pod.namespace, pod.name, node or pod.node, {}, pod_eviction(pod, reads.budgets).budgets)
        )
        claims[pod.ref] = {"claim": user["claim"], "through": user["through"]}
    return tuple(users), claims


def plan_present(
    refs: Sequence[device.DeviceRef], reads: DeviceReads, max_share: float = DEFAULT_MAX_SHARE
) -> list[DevicePlan]:
    """Per device: the step its rule needs and the pods that hold it now; the breaker holds back a new
    rule that would take its pool past `max_share` of its devices."""
    published = device.published_devices(reads.slices)
    plans = []
    for ref in refs:
        name, node = device.rule_name(ref), published.get(ref, "")
        existing = reads.rules.get(name)
        step = device.rule_step(existing, QUARANTINED_EFFECT)
        users, claims = _users(reads, ref, node) if step != STEP_FOREIGN else ((), {})
        plans.append(DevicePlan(ref, node, name, step, existing, users, claims))
    return hold_past_share(plans, published, reads.rules.values(), max_share)


def hold_past_share(
    plans: Sequence[DevicePlan],
    published: Mapping[device.DeviceRef, str],
    rules: Iterable[Mapping[str, Any]],
    max_share: float,
) -> list[DevicePlan]:
    """The breaker over the device pools (driver/pool, one GPU a device): the devices the
    collection's rules hold count as out of service, and a device to be taken out that would put its
    pool over its share is held back with the reason, its rule not written and its users not evicted."""
    out = [ref for ref in (device.rule_device(rule) for rule in rules if device.owned_rule(rule)) if ref is not None]
    pools = count_pools(device.breaker_members(published, out))
    candidates = [Candidate(p.rule, 1, device.pool_keys(p.ref)) for p in plans if p.step == STEP_CREATE]
    held = {h.name: h.reason for h in apply_breaker(pools, candidates, max_share).held}
    return [replace(p, step=STEP_HELD, held=held[p.rule], users=(), claims={}) if p.rule in held else p for p in plans]


def plan_absent(refs: Sequence[device.DeviceRef], reads: DeviceReads) -> list[DevicePlan]:
    """Per device: delete the collection's rule, leave a foreign one, or nothing when there is none."""
    deletable = set(device.releasable(reads.rules.values(), refs))
    plans = []
    for ref in refs:
        name = device.rule_name(ref)
        existing = reads.rules.get(name)
        step = STEP_DELETE if name in deletable else (STEP_NONE if existing is None else STEP_FOREIGN)
        plans.append(DevicePlan(ref, "", name, step, existing))
    return plans


def rule_text(rule: Mapping[str, Any] | None) -> str:
    """A rule as the diff shows it: its selector, taint and owner."""
    if rule is None:
        return ""
    spec = rule.get("spec") or {}
    taint = spec.get("taint") or {}
    selector = spec.get("deviceSelector") or {}
    lines = [f"deviceSelector: {'/'.join(str(selector.get(k, '')) for k in device.SELECTOR_FIELDS)}"]
    lines.append(f"taint: {taint.get('key')}={taint.get('value')}:{taint.get('effect')}")
    lines.append(f"owned: {str(device.owned_rule(rule)).lower()}")
    return "\n".join(lines) + "\n"


def after_rule(plan: DevicePlan, taint_key: str, owner: Mapping[str, str]) -> Mapping[str, Any] | None:
    if plan.step == STEP_CREATE:
        return device.rule_body(plan.ref, taint_key, QUARANTINED_EFFECT, owner)
    if plan.step == STEP_SWITCH and plan.existing is not None:
        spec = dict(plan.existing.get("spec") or {})
        spec["taint"] = dict(spec.get("taint") or {}, effect=QUARANTINED_EFFECT)
        return dict(plan.existing, spec=spec)
    if plan.step == STEP_DELETE:
        return None
    return plan.existing


def diff_entries(plans: Sequence[DevicePlan], taint_key: str, owner: Mapping[str, str]) -> list[dict[str, Any]]:
    return [
        diff_entry(
            f"devicetaintrule/{plan.rule}", rule_text(plan.existing), rule_text(after_rule(plan, taint_key, owner))
        )
        for plan in plans
        if plan.step in (STEP_CREATE, STEP_SWITCH, STEP_DELETE)
    ]


# --- the run -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RuleCalls:
    """What the rules go through: create, read again, switch the effect, delete."""

    create: Callable[[dict[str, Any]], dict[str, Any]]
    get: Callable[[str], dict[str, Any] | None]
    switch: Callable[[dict[str, Any], str], dict[str, Any]]
    delete: Callable[[str], object]
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


@dataclass
class RuleOutcome:
    plan: DevicePlan
    done: bool = True
    simulation: dict[str, int] | None = None
    awaited: bool = False
    error: str = ""


def await_simulation(
    rule: dict[str, Any], calls: RuleCalls, timeout: float
) -> tuple[dict[str, Any], dict[str, int] | None]:
    """The rule as the controller reported on it (effect None), read again until `timeout` seconds."""
    deadline = calls.clock() + timeout
    while True:
        report = device.simulation(rule)
        if report is not None or calls.clock() >= deadline:
            return rule, report
        calls.sleep(0.5)
        rule = calls.get(rule["metadata"]["name"]) or rule


def apply_rule(plan: DevicePlan, calls: RuleCalls, body: dict[str, Any], timeout: float) -> RuleOutcome:
    """Create the rule with effect None, wait for the controller's report, then switch it to NoSchedule;
    a rule of the collection's with another effect is reported on when it is None, then switched."""
    outcome = RuleOutcome(plan)
    rule: dict[str, Any] | None = dict(plan.existing) if plan.existing is not None else None
    if plan.step == STEP_CREATE:
        rule = calls.create(
            dict(body, spec=dict(body["spec"], taint=dict(body["spec"]["taint"], effect=device.EFFECT_NONE)))
        )
    if rule is None or plan.step not in (STEP_CREATE, STEP_SWITCH):
        return outcome
    if device.rule_effect(rule) == device.EFFECT_NONE:
        outcome.awaited = True
        rule, outcome.simulation = await_simulation(rule, calls, timeout)
    calls.switch(rule, QUARANTINED_EFFECT)
    return outcome


def apply_rules(
    plans: Sequence[DevicePlan],
    calls: RuleCalls,
    bodies: Mapping[str, dict[str, Any]],
    timeout: float,
    errors: tuple[type[BaseException], ...],
) -> list[RuleOutcome]:
    outcomes = []
    for plan in plans:
        try:
            if plan.step == STEP_DELETE:
                calls.delete(plan.rule)
                outcomes.append(RuleOutcome(plan))
            elif plan.step in (STEP_CREATE, STEP_SWITCH):
                outcomes.append(apply_rule(plan, calls, bodies[plan.rule], timeout))
            else:
                outcomes.append(RuleOutcome(plan))
        except errors as exc:
            outcomes.append(RuleOutcome(plan, done=False, error=str(exc)))
    return outcomes


def users_to_evict(outcomes: Sequence[RuleOutcome]) -> list[PodEviction]:
    """The users of the devices whose rule is in place (made now, or before)."""
    return [
        pod for o in outcomes if o.done and o.plan.step in (STEP_CREATE, STEP_SWITCH, STEP_NONE) for pod in o.plan.users
    ]


# --- what the run reports ------------------------------------------------------------------------


def _finding(kind: str, plan: DevicePlan, **fields: Any) -> dict[str, Any]:
    return plugin_finding(KINDS.finding(Hit(kind, fields, {"node": plan.node or None, "subject": plan.ref.text()})))


def rule_findings(outcomes: Sequence[RuleOutcome], timeout: float) -> list[dict[str, Any]]:
    found = []
    for outcome in outcomes:
        plan, ref = outcome.plan, outcome.plan.ref.text()
        if plan.step == STEP_HELD:
            found.append(_finding(kinds.HELD_BY_BREAKER, plan, reason=plan.held))
        elif plan.step == STEP_FOREIGN:
            found.append(_finding(kinds.DEVICE_RULE_FOREIGN, plan, rule=plan.rule, device=ref))
        elif not outcome.done:
            found.append(_finding(kinds.DEVICE_RULE_FAILED, plan, rule=plan.rule, device=ref, error=outcome.error))
        elif outcome.simulation is not None:
            found.append(
                _finding(
                    kinds.DEVICE_SIMULATION,
                    plan,
                    rule=plan.rule,
                    device=ref,
                    **{k: str(v) for k, v in outcome.simulation.items()},
                )
            )
        elif outcome.awaited:
            found.append(
                _finding(kinds.DEVICE_SIMULATION_MISSING, plan, rule=plan.rule, device=ref, timeout=f"{timeout:g}")
            )
    return found


def device_entry(outcome: RuleOutcome) -> dict[str, Any]:
    plan = outcome.plan
    users = []
    for pod in plan.users:
        entry = eviction_entry(pod)
        entry.pop("gpus")
        users.append(dict(entry, **plan.claims.get(pod.ref, {})))
    return {
        "device": plan.ref.text(),
        "node": plan.node or None,
        "rule": plan.rule,
        "step": plan.step,
        "simulation": outcome.simulation,
        "users": users,
        "error": outcome.error or None,
    }


def summarize(
    outcomes: Sequence[RuleOutcome], evictions: Sequence[EvictionResult] | None, timeout: float, eviction_timeout: float
) -> dict[str, Any]:
    """The module's result, without `changed`, `writes` and `diff`."""
    pods = eviction_lists(evictions)
    done = [o.plan for o in outcomes if o.done]
    return {
        "devices": [device_entry(o) for o in outcomes],
        "created": [p.rule for p in done if p.step == STEP_CREATE],
        "switched": [p.rule for p in done if p.step == STEP_SWITCH],
        "deleted": [p.rule for p in done if p.step == STEP_DELETE],
        "unchanged": [p.rule for p in done if p.step == STEP_NONE],
        "foreign": [o.plan.rule for o in outcomes if o.plan.step == STEP_FOREIGN],
        "held_back": [
            {"rule": o.plan.rule, "device": o.plan.ref.text(), "reason": o.plan.held}
            for o in outcomes
            if o.plan.step == STEP_HELD
        ],
        "failed": [{"rule": o.plan.rule, "error": o.error} for o in outcomes if not o.done],
        "to_evict": [pod.ref for o in outcomes for pod in o.plan.users],
        "evicted": pods["evicted"],
        "blocked": pods["blocked"],
        "eviction_failed": pods["eviction_failed"],
        "findings": rule_findings(outcomes, timeout) + eviction_findings(evictions or [], eviction_timeout),
    }


def failure_message(summary: Mapping[str, Any]) -> str | None:
    parts = []
    if summary["failed"]:
        parts.append("rules not written: " + "; ".join(f"{f['rule']}: {f['error']}" for f in summary["failed"][:5]))
    if summary["eviction_failed"]:
        parts.append("not evicted: " + "; ".join(f"{f['pod']}: {f['error']}" for f in summary["eviction_failed"][:5]))
    return ("device quarantine incomplete; " + "; ".join(parts) + "; run again to converge") if parts else None
