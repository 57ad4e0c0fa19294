# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One run of gpu_device_quarantine on the write-module skeleton: the devices and the owner
checked, the cluster read, a device asked that no ResourceSlice publishes refused before any write,
the plan, the rules written and the users evicted (nothing sent in check mode), what the run did."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_quarantine import device
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_quarantine.apply import (
    DevicePlan,
    RuleCalls,
    RuleOutcome,
    apply_rules,
    diff_entries,
    failure_message,
    plan_absent,
    plan_present,
    summarize,
    users_to_evict,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_quarantine.reads import (
    DeviceReads,
    create_rule,
    delete_rule,
    get_rule,
    read_rules,
    read_slices,
    read_users,
    switch_rule,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.catalogue import KINDS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.kinds import quarantine as kinds
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import Hit
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.results import plugin_finding
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import (
    CheckFailed,
    ClusterError,
    OptionError,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.breaker import check_share
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.evictions import (
    EvictionSettings,
    blocked_warning,
    evict_through,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.module import WriteRun
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.ownership import check_text


def owner(params: Mapping[str, Any]) -> dict[str, str]:
    """Who quarantines the devices, why and when, as each rule keeps it; empty to release them."""
    if params["state"] == "absent":
        return {"who": "", "why": "", "when": ""}
    if params["simulation_timeout"] < 0:
        raise OptionError(f"simulation_timeout must be 0 or more seconds, not {params['simulation_timeout']}")
    return {
        "who": check_text(params["quarantined_by"], "quarantined_by"),
        "why": check_text(params["reason"], "reason"),
        "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def refused(unknown: list[str]) -> CheckFailed:
    """The failure of a run asked for devices no ResourceSlice publishes: nothing is written."""
    findings = [
        plugin_finding(
            KINDS.finding(Hit(kinds.DEVICE_NOT_PUBLISHED, {"device": text}, {"node": None, "subject": text}))
        )
        for text in unknown
    ]
    texts = [f"{text}: no ResourceSlice publishes this device" for text in unknown]
    result = {"changed": False, "refused": texts, "devices": [], "findings": findings}
    return CheckFailed("refused, nothing written: " + "; ".join(texts), result=result)


def rule_calls(client: KubeClient) -> RuleCalls:
    return RuleCalls(
        create=lambda body: create_rule(client, body),
        get=lambda name: get_rule(client, name),
        switch=lambda rule, effect: switch_rule(client, rule, effect),
        delete=lambda name: delete_rule(client, name),
    )


def plans_for(params: Mapping[str, Any], client: KubeClient, refs: list[device.DeviceRef]) -> list[DevicePlan]:
    """The plan per device: to quarantine (the breaker applied) or to release; refused when a
    device to quarantine is not published."""
    reads = DeviceReads(slices=read_slices(client), rules=read_rules(client))
    if params["state"] == "absent":
        return plan_absent(refs, reads)
    published = device.published_devices(reads.slices)
    unknown = device.unknown_devices(refs, published)
    if unknown:
        raise refused(unknown)
    read_users(client, reads, sorted({node for ref, node in published.items() if ref in refs and node}))
    return plan_present(refs, reads, check_share(params["max_share"]))


def warnings_for(summary: Mapping[str, Any]) -> list[str]:
    """Pods their budget kept on the devices, rules of the collection's name that are not its own,
    reports of the controller that did not come."""
    warnings = [w for w in (blocked_warning(summary["blocked"], "quarantined devices"),) if w]
    shown = (kinds.DEVICE_RULE_FOREIGN, kinds.DEVICE_SIMULATION_MISSING)
    return warnings + [f["problem"] for f in summary["findings"] if f["kind"] in shown]


def run_device_quarantine(params: Mapping[str, Any], client: KubeClient, check_mode: bool) -> WriteRun:
    """Quarantine or release the devices asked (nothing sent in check mode), and say what was done."""
    refs = device.parse_devices(params["devices"])
    who = owner(params)
    plans = plans_for(params, client, refs)
    bodies = {p.rule: device.rule_body(p.ref, params["taint_key"], "NoSchedule", who) for p in plans}
    evictions = None
    if check_mode:
        outcomes = [RuleOutcome(p) for p in plans]
    else:
        outcomes = apply_rules(plans, rule_calls(client), bodies, params["simulation_timeout"], (ClusterError,))
        if params["evict"]:
            evictions = evict_through(client, users_to_evict(outcomes), EvictionSettings(params["eviction_timeout"]))
    summary = summarize(outcomes, evictions, params["simulation_timeout"], params["eviction_timeout"])
    would_evict = check_mode and params["evict"] and bool(summary["to_evict"])
    done = summary["created"] or summary["switched"] or summary["deleted"] or summary["evicted"]
    diff = diff_entries([o.plan for o in outcomes if o.done], params["taint_key"], who)
    result = dict(summary, refused=[])
    return WriteRun(result, bool(done or would_evict), diff, warnings_for(summary), failure_message(summary))
