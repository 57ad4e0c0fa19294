"""A module's result is handed back without a sanitising copy when there is nothing to mask, and
is the same text AnsibleModule prints; with values to mask, they are masked as before."""

import datetime
import io
import json
from contextlib import redirect_stdout
from typing import Any

import pytest
from ansible.module_utils import basic
from ansible.module_utils.basic import AnsibleModule

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube import module as kube_module
from tests.module_args import patch_module_args

SPEC = kube_module.with_connection_options({"name": {"type": "str"}})
RESULT: dict[str, Any] = {
    "changed": False,
    "nodes": [{"name": "gpu-a", "capacity": 8, "ready": True, "taints": [], "zone": None, "ratio": 0.5}],
    "models": {"NVIDIA-A100": {"nodes": 1, "labels": ("a", "b")}},
    "when": datetime.datetime(2025, 1, 2, 3, 4, 5),
    "ansible_facts": {"gpu_fleet": {"api_requests": 5}},
}


def printed(make: Any, args: dict[str, Any], result: dict[str, Any]) -> str:
    out = io.StringIO()
    with patch_module_args({**args, "_ansible_no_log": False}), redirect_stdout(out), pytest.raises(SystemExit):
        make(SPEC).exit_json(**result)
    return out.getvalue()


def plain_module(spec: dict[str, Any]) -> AnsibleModule:
    return AnsibleModule(argument_spec=spec, supports_check_mode=True)


class Spy:
    """Counts the calls that sanitise the result (AnsibleModule also calls it on its way in)."""

    def __init__(self, wrapped: Any) -> None:
        self.wrapped = wrapped
        self.calls = 0

    def __call__(self, value: Any, no_log_strings: Any) -> Any:
        if isinstance(value, dict) and "nodes" in value:
            self.calls += 1
        return self.wrapped(value, no_log_strings)


def test_nothing_to_mask_prints_what_ansible_module_prints_without_copying(monkeypatch: pytest.MonkeyPatch):
    for name in ("K8S_AUTH_API_KEY", "K8S_AUTH_PASSWORD", "K8S_AUTH_PROXY_HEADERS_PROXY_BASIC_AUTH"):
        monkeypatch.delenv(name, raising=False)
    spy = Spy(basic.remove_values)
    monkeypatch.setattr(basic, "remove_values", spy)
    ours = printed(kube_module.api_module, {"name": "x"}, RESULT)
    assert basic.remove_values is spy
    assert spy.calls == 0
    assert ours == printed(plain_module, {"name": "x"}, RESULT)
    assert json.loads(ours)["when"] == "2025-01-02T03:04:05"


def test_values_to_mask_are_masked_as_ansible_module_masks_them(monkeypatch: pytest.MonkeyPatch):
    secret = "s3cr3t-api-key-value"
    result = {**RESULT, "msg": f"token {secret} refused", "echo": secret}
    spy = Spy(basic.remove_values)
    monkeypatch.setattr(basic, "remove_values", spy)
    ours = printed(kube_module.api_module, {"api_key": secret}, result)
    assert basic.remove_values is spy
    assert spy.calls == 1
    assert secret not in ours
    assert json.loads(ours)["echo"] == "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"
    assert ours == printed(plain_module, {"api_key": secret}, result)
