"""gpu_device_plugin in process: its documentation is its argument spec, and a config the plugin
would reject or ignore is refused before any request (the connection points at a port nobody
listens on, so a request would fail the task with another message)."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import pytest
import yaml

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.kinds.plugin_deploy import KINDS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_deploy.releases import (
    DEFAULT_RELEASE,
    RELEASES,
)
from ansible_collections.kubegpu.scheduling.plugins.modules import gpu_device_plugin
from tests.module_args import patch_module_args

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "plugin_config"
NOBODY = {"host": "https://127.0.0.1:1", "validate_certs": False, "api_key": "unused"}


def run_module(args):
    out = io.StringIO()
    with patch_module_args(args), redirect_stdout(out), pytest.raises(SystemExit) as exited:
        gpu_device_plugin.main()
    return exited.value.code, json.loads(out.getvalue())


def test_the_argument_spec_matches_the_documentation():
    doc = yaml.safe_load(gpu_device_plugin.DOCUMENTATION)
    spec = gpu_device_plugin.argument_spec()
    own = {name for name in spec if name in doc["options"]}
    assert own == set(doc["options"])
    for name in own:
        option = doc["options"][name]
        assert spec[name]["type"] == option["type"], name
        assert spec[name].get("default") == option.get("default"), name
        assert spec[name].get("choices") == option.get("choices"), name
    assert doc["options"]["version"]["choices"] == list(RELEASES)
    assert doc["options"]["version"]["default"] == DEFAULT_RELEASE
    described = " ".join(doc["description"])
    assert [k.id for k in KINDS if f"V({k.id})" not in described] == []


def issue_config(name: str, key: str) -> str:
    return yaml.safe_load((FIXTURES / "bad" / name).read_text())["data"][key]


def test_the_config_of_issue_1433_is_refused_before_any_request():
    code, result = run_module({**NOBODY, "config": issue_config("issue-1433-configmap.yaml", "any")})
    assert code == 1 and result["failed"] is True
    assert result["msg"].startswith("config refused, nothing applied")
    assert result["writes"] == 0 and result["changed"] is False
    kinds = {f["kind"] for f in result["findings"]}
    assert kinds == {"deploy_config_invalid"}
    assert any("flags.renameByDefault" in f["problem"] for f in result["findings"])
    assert {f["kind"] for f in result["config_findings"]} >= {"config_misplaced_key"}


def test_mps_is_refused_for_the_static_daemonset():
    config = {"version": "v1", "sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}}
    code, result = run_module({**NOBODY, "config": config, "version": "v0.17.4"})
    assert code == 1
    assert "config_mps_not_deployable" in {f["kind"] for f in result["config_findings"]}


def test_a_good_config_goes_on_to_the_cluster():
    config = {"version": "v1", "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}}
    code, result = run_module({**NOBODY, "config": config})
    assert code == 1 and "findings" not in result
    assert "127.0.0.1:1" in result["msg"]


def test_a_bad_option_names_itself():
    code, result = run_module({**NOBODY, "max_unavailable": "all of them"})
    assert code == 1 and result["msg"].startswith("max_unavailable:")
