"""gpu_plugin_config_validate in process, and the same checks from the command line."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest
import yaml

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.kinds.plugin_config import KINDS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_config import cli
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_config.schema import DEFAULT_RELEASE, RELEASES
from ansible_collections.kubegpu.scheduling.plugins.modules import gpu_plugin_config_validate
from tests.module_args import patch_module_args

REPO = Path(__file__).resolve().parents[4]
FIXTURES = REPO / "tests" / "unit" / "fixtures" / "plugin_config"
SCRIPT = REPO / "scripts" / "gpu-plugin-config-validate"


def run_module(args):
    out = io.StringIO()
    with patch_module_args(args), redirect_stdout(out), pytest.raises(SystemExit) as exited:
        gpu_plugin_config_validate.main()
    return exited.value.code, json.loads(out.getvalue())


def test_the_argument_spec_matches_the_documentation():
    doc = yaml.safe_load(gpu_plugin_config_validate.DOCUMENTATION)
    spec = gpu_plugin_config_validate.argument_spec()
    assert set(spec) == set(doc["options"])
    for name, option in doc["options"].items():
        assert spec[name]["type"] == option["type"], name
        assert spec[name].get("default") == option.get("default"), name
        assert spec[name].get("choices") == option.get("choices"), name
    assert doc["options"]["release"]["choices"] == list(RELEASES)
    assert doc["options"]["release"]["default"] == DEFAULT_RELEASE
    # Every kind is named in the description.
    described = " ".join(doc["description"])
    assert [k.id for k in KINDS if f"V({k.id})" not in described] == []


def test_a_bad_file_fails_the_task_with_each_mistake():
    code, result = run_module({"src": str(FIXTURES / "bad" / "issue-1433-configmap.yaml")})
    assert code == 1 and result["failed"] is True and result["valid"] is False
    assert [f["path"] for f in result["findings"]] == ["flags.renameByDefault", "flags.failRequestsGreaterThanOne"]
    assert "2 error(s)" in result["msg"]


def test_report_only_and_named_configs():
    configs = {
        "default": "version: v1",
        "sliced": "sharing:\n  timeSlicing:\n    resources: [{name: gpu, replicas: 1}]",
    }
    code, result = run_module({"configs": configs, "default_config": "nope", "report_only": True})
    assert code == 0 and result["changed"] is False and result["valid"] is False
    assert {f["kind"] for f in result["findings"]} == {"config_default_missing", "config_replicas_below_two"}


def test_a_good_config_passes_and_says_what_the_plugin_advertises():
    text = (FIXTURES / "good" / "readme-time-slicing.yaml").read_text()
    code, result = run_module({"config": text})
    assert code == 0 and result["valid"] is True and result["findings"] == []
    assert result["configs"]["config"]["shared"] == [
        {"name": "nvidia.com/gpu", "advertised": "nvidia.com/gpu.shared", "replicas": 10}
    ]


def test_the_command_line_exits_1_on_errors_and_writes_json(tmp_path):
    out, err = io.StringIO(), io.StringIO()
    streams = (out, err, io.StringIO())
    report = tmp_path / "verdict.json"
    bad = FIXTURES / "bad" / "issue-1548-gpu-operator-values.yaml"
    assert cli.run([str(bad), "--json", str(report)], streams) == cli.EXIT_FAILED
    assert "sharing.mps.resources[0].replicas: error config_replicas_below_two" in out.getvalue()
    assert json.loads(report.read_text())["findings"][0]["config"] == "rtx-2080-ti"
    good = FIXTURES / "good" / "readme-flags.yaml"
    assert cli.run([str(good)], streams) == cli.EXIT_OK
    # Info findings fail nothing; --fail-on never passes errors.
    assert cli.run([str(FIXTURES / "bad" / "issue-929-mps.yaml"), "--fail-on", "never"], streams) == 0
    assert err.getvalue() == ""
    assert cli.run(["/nonexistent.yaml"], streams) == cli.EXIT_USAGE
    assert "cannot read /nonexistent.yaml" in err.getvalue()


def test_the_script_runs_outside_the_virtual_environment_from_standard_input():
    text = "version: v1\nflags:\n  renameByDefault: true\n"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "-", "--json", "-"], input=text, capture_output=True, text=True, check=False
    )
    assert done.returncode == 1, done.stderr
    verdict = json.loads(done.stdout)
    assert [(f["config"], f["kind"]) for f in verdict["findings"]] == [("<stdin>", "config_misplaced_key")]
    assert SCRIPT.stat().st_mode & 0o111
