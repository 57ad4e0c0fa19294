"""The run of a device quarantine through fake calls: a rule created with effect None, the
controller's report awaited then the switch to NoSchedule (never NoExecute), a rule already so left,
a foreign rule of the same name left with a finding, only the collection's rules deleted on release,
and the device's users (with their budgets) the ones handed to the evictions."""

from __future__ import annotations

from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_quarantine import apply as run
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_quarantine import device
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_quarantine.reads import DeviceReads
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.evictions import project_budget, project_pod

REF = device.DeviceRef("gpu.nvidia.com", "dra-h100", "gpu-1")
OTHER = device.DeviceRef("gpu.nvidia.com", "dra-h100", "gpu-0")
OWNER = {"who": "oncall", "why": "XID 79", "when": "2026-12-03T10:00:00Z"}
SLICES = [
    {
        "driver": "gpu.nvidia.com",
        "pool": "dra-h100",
        "node": "dra-h100",
        "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}],
    }
]


def _claim(name: str, pod: str, ref: device.DeviceRef) -> dict:
    return {
        "metadata": {"namespace": "ml", "name": name},
        "status": {
            "allocation": {"devices": {"results": [{"driver": ref.driver, "pool": ref.pool, "device": ref.device}]}},
            "reservedFor": [{"resource": "pods", "name": pod}],
        },
    }


def _pod(name: str, labels: dict) -> dict:
    return {
        "metadata": {"namespace": "ml", "name": name, "labels": labels},
        "spec": {"nodeName": "dra-h100"},
        "status": {"phase": "Running"},
    }


def _reads(rules: dict | None = None) -> DeviceReads:
    budget = {
        "metadata": {"namespace": "ml", "name": "keep", "generation": 1},
        "spec": {"selector": {"matchLabels": {"app": "kept"}}},
        "status": {"disruptionsAllowed": 0, "observedGeneration": 1},
    }
    return DeviceReads(
        slices=SLICES,
        claims=[_claim("a", "train", REF), _claim("b", "kept", REF), _claim("c", "elsewhere", OTHER)],
        rules=rules or {},
        pods=[
            p
            for p in (
                project_pod(_pod(n, {"app": n}), frozenset({"dra-h100"}), lambda _r: False)
                for n in ("train", "kept", "elsewhere")
            )
            if p
        ],
        budgets=[b for b in [project_budget(budget)] if b],
    )


class FakeRules:
    def __init__(self, report_after: int = 1):
        self.sent: list[tuple] = []
        self.reads = 0
        self.report_after = report_after
        self.now = 0.0

    def create(self, body):
        self.sent.append(("create", body["spec"]["taint"]["effect"]))
        return dict(body, metadata=dict(body["metadata"], generation=1, resourceVersion="1"))

    def get(self, name):
        self.reads += 1
        rule = device.rule_body(REF, device.DEFAULT_TAINT_KEY, device.EFFECT_NONE, OWNER)
        rule["metadata"].update(generation=1, resourceVersion="2")
        if self.reads >= self.report_after:
            message = (
                "1 published device selected. 1 allocated device selected. 2 pods would be evicted in 1 namespace."
            )
            rule["status"] = {
                "conditions": [
                    {"type": "EvictionInProgress", "reason": "NoEffect", "observedGeneration": 1, "message": message}
                ]
            }
        return rule

    def switch(self, rule, effect):
        self.sent.append(("switch", effect, rule["metadata"]["resourceVersion"]))
        return rule

    def delete(self, name):
        self.sent.append(("delete", name))

    def calls(self) -> run.RuleCalls:
        def sleep(seconds):
            self.now += seconds

        return run.RuleCalls(self.create, self.get, self.switch, self.delete, clock=lambda: self.now, sleep=sleep)


def _bodies(plans):
    return {p.rule: device.rule_body(p.ref, device.DEFAULT_TAINT_KEY, "NoSchedule", OWNER) for p in plans}


def test_a_new_rule_is_created_with_effect_none_reported_then_switched_to_noschedule():
    plans = run.plan_present([REF], _reads())
    assert [p.step for p in plans] == ["create"]
    assert [u.ref for u in plans[0].users] == ["ml/kept", "ml/train"]
    assert plans[0].users[0].blocking == ("keep",) and plans[0].users[1].blocking == ()
    fake = FakeRules(report_after=2)
    outcomes = run.apply_rules(plans, fake.calls(), _bodies(plans), 30, (ClusterError,))
    assert fake.sent == [("create", "None"), ("switch", "NoSchedule", "2")]
    assert outcomes[0].simulation == {"published": 1, "allocated": 1, "pods": 2, "namespaces": 1}
    summary = run.summarize(outcomes, None, 30, 300)
    assert summary["created"] == [plans[0].rule] and summary["to_evict"] == ["ml/kept", "ml/train"]
    assert [f["kind"] for f in summary["findings"]] == ["quarantine.device_taint_simulation"]
    assert [u.ref for u in run.users_to_evict(outcomes)] == ["ml/kept", "ml/train"]


def test_no_report_within_the_timeout_is_said_and_the_rule_switched_all_the_same():
    plans = run.plan_present([REF], _reads())
    fake = FakeRules(report_after=10**6)
    outcomes = run.apply_rules(plans, fake.calls(), _bodies(plans), 3, (ClusterError,))
    assert fake.sent[-1][:2] == ("switch", "NoSchedule") and fake.now >= 3
    findings = run.summarize(outcomes, None, 3, 300)["findings"]
    assert [f["kind"] for f in findings] == ["quarantine.device_taint_simulation_missing"]
    assert "within 3s" in findings[0]["problem"]


def test_a_rule_already_noschedule_sends_nothing_and_a_foreign_one_is_left():
    ours = device.rule_body(REF, device.DEFAULT_TAINT_KEY, "NoSchedule", OWNER)
    foreign = device.rule_body(OTHER, device.DEFAULT_TAINT_KEY, "NoExecute", OWNER)
    foreign["metadata"]["labels"] = {}
    rules = {ours["metadata"]["name"]: ours, foreign["metadata"]["name"]: foreign}
    plans = run.plan_present([OTHER, REF], _reads(rules))
    assert [p.step for p in plans] == ["foreign", "none"]
    assert plans[0].users == ()
    fake = FakeRules()
    outcomes = run.apply_rules(plans, fake.calls(), _bodies(plans), 30, (ClusterError,))
    assert fake.sent == []
    summary = run.summarize(outcomes, None, 30, 300)
    assert summary["foreign"] == [foreign["metadata"]["name"]] and summary["unchanged"] == [ours["metadata"]["name"]]
    assert [f["kind"] for f in summary["findings"]] == ["quarantine.device_rule_not_ours"]
    assert run.diff_entries(plans, device.DEFAULT_TAINT_KEY, OWNER) == []


def test_release_deletes_only_the_collections_rules():
    ours = device.rule_body(REF, device.DEFAULT_TAINT_KEY, "NoSchedule", OWNER)
    foreign = device.rule_body(OTHER, device.DEFAULT_TAINT_KEY, "NoSchedule", OWNER)
    foreign["metadata"]["labels"] = {"team": "other"}
    rules = {ours["metadata"]["name"]: ours, foreign["metadata"]["name"]: foreign}
    plans = run.plan_absent([OTHER, REF], _reads(rules))
    assert [p.step for p in plans] == ["foreign", "delete"]
    fake = FakeRules()
    outcomes = run.apply_rules(plans, fake.calls(), {}, 30, (ClusterError,))
    assert fake.sent == [("delete", ours["metadata"]["name"])]
    diff = run.diff_entries(plans, device.DEFAULT_TAINT_KEY, OWNER)
    assert len(diff) == 1 and "NoSchedule" in diff[0]["before"] and diff[0]["after"] == ""
    assert run.summarize(outcomes, None, 30, 300)["deleted"] == [ours["metadata"]["name"]]


def test_a_failed_write_is_reported_and_its_users_not_evicted():
    plans = run.plan_present([REF], _reads())
    fake = FakeRules()

    def refuse(body):
        raise ClusterError("POST devicetaintrules: 403 Forbidden", 403)

    calls = run.RuleCalls(refuse, fake.get, fake.switch, fake.delete)
    outcomes = run.apply_rules(plans, calls, _bodies(plans), 30, (ClusterError,))
    assert run.users_to_evict(outcomes) == []
    summary = run.summarize(outcomes, None, 30, 300)
    assert "403 Forbidden" in run.failure_message(summary)
    assert [f["kind"] for f in summary["findings"]] == ["quarantine.device_rule_write_failed"]


def test_the_diff_of_a_new_rule_shows_noschedule_never_noexecute():
    plans = run.plan_present([REF], _reads())
    (entry,) = run.diff_entries(plans, device.DEFAULT_TAINT_KEY, OWNER)
    assert entry["before"] == ""
    assert (
        "taint: kubegpu.io/device-quarantine=failed:NoSchedule" in entry["after"] and "NoExecute" not in entry["after"]
    )


def test_the_breaker_holds_back_a_device_past_its_pools_share_and_its_users_are_not_evicted():
    # Two devices in the pool: at 0.5 one may be out; gpu-0 already is (a rule of ours), so gpu-1 is held.
    ours = device.rule_body(OTHER, device.DEFAULT_TAINT_KEY, "NoSchedule", OWNER)
    plans = run.plan_present([REF], _reads({ours["metadata"]["name"]: ours}), max_share=0.5)
    (plan,) = plans
    assert plan.step == run.STEP_HELD and plan.users == ()
    assert "2 of its 2 GPUs would be out of service" in plan.held and "1 already" in plan.held
    fake = FakeRules()
    outcomes = run.apply_rules(plans, fake.calls(), _bodies(plans), timeout=5, errors=(ClusterError,))
    assert fake.sent == [] and run.users_to_evict(outcomes) == []
    summary = run.summarize(outcomes, None, 5, 0)
    assert summary["held_back"] == [{"rule": plan.rule, "device": REF.text(), "reason": plan.held}]
    assert summary["created"] == [] and summary["to_evict"] == []
    assert [f["kind"] for f in summary["findings"]] == ["quarantine.held_by_breaker"]


def test_the_breaker_lets_a_device_through_while_its_pool_stays_within_the_share():
    (plan,) = run.plan_present([REF], _reads(), max_share=0.5)
    assert plan.step == run.STEP_CREATE and plan.held == ""
    (held, allowed) = run.plan_present([OTHER, REF], _reads(), max_share=0.5)[::-1]
    assert (allowed.step, held.step) == (run.STEP_CREATE, run.STEP_HELD)
