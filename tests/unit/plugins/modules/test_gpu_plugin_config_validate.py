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
from tests.documented_options import spec_drift
from tests.module_args import patch_module_args
from tests.module_deprecations import as_module_process

REPO = Path(__file__).resolve().parents[4]
FIXTURES = REPO / "tests" / "unit" / "fixtures" / "plugin_config"
SCRIPT = REPO / "scripts" / "gpu-plugin-config-validate"


def run_module(args):
    out = io.StringIO()
    with as_module_process(), patch_module_args(args), redirect_stdout(out), pytest.raises(SystemExit) as exited:
        gpu_plugin_config_validate.main()
    return exited.value.code, json.loads(out.getvalue())


def test_the_argument_spec_matches_the_documentation():
    doc = yaml.safe_load(gpu_plugin_config_validate.DOCUMENTATION)
    spec = gpu_plugin_config_validate.argument_spec()
    assert spec_drift(gpu_plugin_config_validate, spec) == []
    assert spec["report_only"]["removed_in_version"] == "2.0.0"
    assert spec["report_only"]["removed_from_collection"] == "kubegpu.scheduling"
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


def test_fail_on_never_and_named_configs():
    configs = {
        "default": "version: v1",
        "sliced": "sharing:\n  timeSlicing:\n    resources: [{name: gpu, replicas: 1}]",
    }
    code, result = run_module({"configs": configs, "default_config": "nope", "fail_on": "never"})
    assert code == 0 and result["changed"] is False and result["valid"] is False
    assert {f["kind"] for f in result["findings"]} == {"config_default_missing", "config_replicas_below_two"}
    assert "deprecations" not in result


def test_report_only_still_only_reports_and_says_it_is_deprecated():
    code, result = run_module({"config": "version: v9", "report_only": True})
    assert code == 0 and result["valid"] is False
    (deprecation,) = result["deprecations"]  # its shape differs between ansible-core 2.18 and 2.19
    assert "report_only" in json.dumps(deprecation) and deprecation["version"] == "2.0.0"
    code, result = run_module({"config": "version: v9", "report_only": False})
    assert code == 1


def test_fail_on_warning_fails_on_a_warning_and_error_does_not():
    config = {"version": "v1", "Flags": {}}  # a key in the wrong case: a warning
    code, result = run_module({"config": config})
    assert code == 0 and [f["severity"] for f in result["findings"]] == ["warning"]
    code, result = run_module({"config": config, "fail_on": "warning"})
    assert code == 1 and result["msg"].startswith("1 warning(s) in the device-plugin config: config: Flags: ")


def test_several_files_a_folder_and_inline_documents_are_each_checked(tmp_path):
    bad = FIXTURES / "bad"
    code, one = run_module({"src": str(bad / "issue-1433-configmap.yaml"), "fail_on": "never"})
    code, two = run_module(
        {"src": [str(bad / "issue-1433-configmap.yaml"), str(bad / "issue-1132-mps.yaml")], "fail_on": "never"}
    )
    assert len(two["findings"]) > len(one["findings"])
    code, folder = run_module({"src": [str(bad)], "fail_on": "never"})
    assert code == 0 and len(folder["findings"]) > len(two["findings"])
    code, glob = run_module({"src": [str(bad / "issue-1*.yaml")], "fail_on": "never"})
    assert {f["config"] for f in glob["findings"]} < {f["config"] for f in folder["findings"]}
    text = (bad / "issue-1433-configmap.yaml").read_text()
    code, inline = run_module({"definition": text, "fail_on": "never"})
    assert [(f["kind"], f["path"]) for f in inline["findings"]] == [(f["kind"], f["path"]) for f in one["findings"]]
    code, objects = run_module({"definition": list(yaml.safe_load_all(text)), "fail_on": "never"})
    assert objects["findings"] == inline["findings"]
    code, missing = run_module({"src": [str(tmp_path / "absent.yaml")]})
    assert code == 1 and missing["msg"] == f"src: {tmp_path / 'absent.yaml'}: no such file or directory"


def test_a_config_may_be_given_as_a_dictionary():
    text = (FIXTURES / "good" / "readme-time-slicing.yaml").read_text()
    code, as_text = run_module({"config": text})
    code, as_dict = run_module({"config": yaml.safe_load(text)})
    assert code == 0 and as_dict["configs"] == as_text["configs"]


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
    assert cli.run([str(FIXTURES / "good" / "issue-929-mps.yaml")], streams) == cli.EXIT_OK
    assert cli.run([str(FIXTURES / "bad" / "plugin-test-mps-49-replicas.yaml"), "--fail-on", "never"], streams) == 0
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
