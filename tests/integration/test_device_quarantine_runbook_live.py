"""playbooks/device_quarantine.yml on the local control plane (1.37.2), as the on-call runbook
(docs/runbooks/gpu-device-quarantine.md) runs it, on a device of the DRA node dra-h100 that no claim
holds, with the API server's request counters as the witness (those of
test_device_quarantine_module_live.py).

The dry run (--check --diff) shows the rule and sends no write; the real run creates the collection's
DeviceTaintRule (one POST, one PATCH to NoSchedule) and its report task names it; a rerun writes
nothing; the release (state absent), dry run first, deletes it. No pod is evicted, and the rule is gone
at its end.
"""

from __future__ import annotations

import json
import re
import subprocess
from typing import Any

import pytest
from conftest import ANSIBLE_BIN, REPO_ROOT, LocalCluster, ansible_env
from test_device_quarantine_module_live import (
    NODE,
    RESOURCE,
    entry,
    module_writes,
    rule_writes,
    since,
    writes,
    writes_from_now,
)

from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_quarantine import device as plan

pytestmark = [pytest.mark.cluster]

PLAYBOOK = REPO_ROOT / "playbooks" / "device_quarantine.yml"
RECAP = re.compile(r"^localhost\s+:\s+ok=\d+\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.MULTILINE)
TAINT = "taint: kubegpu.io/device-quarantine=failed:NoSchedule"


def free_device(cluster: LocalCluster) -> plan.DeviceRef:
    """A device a ResourceSlice of NODE publishes that no ResourceClaim has allocated and no DeviceTaintRule names
    (where DeviceTaintRules are served)."""
    held = {
        (result["driver"], result["pool"], result["device"])
        for claim in cluster.get(f"{RESOURCE}/resourceclaims")["items"]
        for result in ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", [])
    }
    status, rules = cluster.api.request("GET", f"{RESOURCE}/devicetaintrules")
    assert status in (200, 404), rules  # 404 where DeviceTaintRules are not served (1.34)
    named = {
        (selector.get("driver"), selector.get("pool"), selector.get("device"))
        for rule in (rules["items"] if status == 200 else [])
        for selector in [rule["spec"].get("deviceSelector") or {}]
    }
    for item in cluster.get(f"{RESOURCE}/resourceslices")["items"]:
        spec = item["spec"]
        if spec.get("nodeName") != NODE:
            continue
        for published in spec.get("devices", []):
            key = (spec["driver"], spec["pool"]["name"], published["name"])
            if key not in held and key not in named:
                return plan.DeviceRef(*key)
    pytest.fail(f"every device of {NODE} is held by a claim or named by a rule")


def run_playbook(cluster: LocalCluster, extra: dict[str, Any], *flags: str) -> tuple[int, str]:
    """ansible-playbook with the default output: (the recap's changed count, the output). The play must pass."""
    command = [str(ANSIBLE_BIN / "ansible-playbook"), str(PLAYBOOK), *flags, "-e", json.dumps(extra)]
    done = subprocess.run(
        command, check=False, env=ansible_env(cluster.kubeconfig), capture_output=True, text=True, timeout=180
    )
    recap = RECAP.search(done.stdout)
    assert done.returncode == 0 and recap and recap.groups()[1:] == ("0", "0"), done.stdout[-4000:] + done.stderr
    return int(recap[1]), done.stdout


def test_the_runbook_dry_runs_quarantines_a_free_device_reruns_unchanged_and_releases_it(cluster: LocalCluster):
    device = free_device(cluster)
    rule = plan.rule_name(device)
    path = f"{RESOURCE}/devicetaintrules/{rule}"
    extra = {
        "device_quarantine_devices": [entry(device)],
        "device_quarantine_reason": "simulated XID 79 (runbook test)",
        "device_quarantine_quarantined_by": "kubegpu-test",
        "device_quarantine_evict": True,
        "device_quarantine_simulation_timeout": 20,
    }
    try:
        before = writes_from_now(cluster)
        changed, printed = run_playbook(cluster, extra, "--check", "--diff")
        assert module_writes(since(before, writes(cluster))) == {}
        assert cluster.api.request("GET", path)[0] == 404
        assert changed == 1 and f"+{TAINT}" in printed and "NoExecute" not in printed, printed
        assert (
            "dry run, nothing sent" in printed
            and f"to quarantine (a new rule, effect None then NoSchedule): {rule}" in printed
        )
        assert "pods that hold the devices: none" in printed and "write requests sent: 0" in printed

        before = writes_from_now(cluster)
        changed, printed = run_playbook(cluster, extra)
        delta = since(before, writes(cluster))
        assert changed == 1, printed
        assert rule_writes(delta) == {
            ("POST", "devicetaintrules", "", "201"): 1,
            ("PATCH", "devicetaintrules", "", "200"): 1,
        }, delta
        assert module_writes(delta) == rule_writes(delta), "no pod was evicted"
        written = cluster.get(path)
        assert plan.owned_rule(written) and written["spec"]["taint"]["effect"] == "NoSchedule", written
        assert written["spec"]["deviceSelector"] == entry(device)
        assert f"quarantined (a new rule, effect None then NoSchedule): {rule}" in printed
        assert "selects 1 published and 0 allocated device(s); 0 pod(s) in 0 namespace(s) would be evicted" in printed
        assert "write requests sent: 2" in printed, printed

        before = writes_from_now(cluster)
        changed, printed = run_playbook(cluster, extra)
        assert module_writes(since(before, writes(cluster))) == {}
        assert changed == 0 and f"already as asked: {rule}" in printed and "write requests sent: 0" in printed, printed

        release = dict(extra, device_quarantine_state="absent", device_quarantine_reason="repaired (runbook test)")
        before = writes_from_now(cluster)
        changed, printed = run_playbook(cluster, release, "--check", "--diff")
        assert module_writes(since(before, writes(cluster))) == {}
        assert changed == 1 and f"-{TAINT}" in printed and f"to release (its rule deleted): {rule}" in printed, printed
        assert cluster.api.request("GET", path)[0] == 200

        before = writes_from_now(cluster)
        changed, printed = run_playbook(cluster, release)
        assert rule_writes(since(before, writes(cluster))) == {("DELETE", "devicetaintrules", "", "200"): 1}
        assert changed == 1 and f"released (its rule deleted): {rule}" in printed, printed
        assert cluster.api.request("GET", path)[0] == 404
    finally:
        assert cluster.delete(path) in (200, 202, 404)
