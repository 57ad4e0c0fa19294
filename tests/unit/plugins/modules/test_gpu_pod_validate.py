"""gpu_pod_validate in process, and the same checks from the command line."""

import base64
import io
import json
import os
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path
from xml.etree import ElementTree

import jsonschema
import pytest
import yaml

from ansible_collections.kubegpu.scheduling.plugins.doc_fragments import read_only as read_only_fragment
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube import module as api_module
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.config import AUTH_ARG_SPEC
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate import cli as validate_cli
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.rules import RULES
from ansible_collections.kubegpu.scheduling.plugins.modules import gpu_pod_validate
from tests.documented_options import spec_drift
from tests.module_args import patch_module_args
from tests.module_deprecations import as_module_process

REPO = Path(__file__).resolve().parents[4]
FIXTURES = REPO / "tests" / "unit" / "fixtures" / "manifests"
SCRIPT = REPO / "scripts" / "gpu-pod-validate"
SARIF_SCHEMA = REPO / "tests" / "unit" / "fixtures" / "sarif" / "sarif-schema-2.1.0.json"


def run_module(args, *, check_mode=False):
    """Run the module in process; returns (exit code, result)."""
    if check_mode:
        args = {**args, "_ansible_check_mode": True}
    out = io.StringIO()
    with as_module_process(), patch_module_args(args), redirect_stdout(out), pytest.raises(SystemExit) as exited:
        gpu_pod_validate.main()
    return exited.value.code, json.loads(out.getvalue())


@pytest.fixture
def in_fixtures(monkeypatch):
    monkeypatch.chdir(FIXTURES)


# ---------------------------------------------------------------------------------------------
# Documentation and argument spec


def documented(block):
    return yaml.safe_load(getattr(gpu_pod_validate, block))


def test_the_argument_spec_matches_the_documentation():
    doc = documented("DOCUMENTATION")
    spec = gpu_pod_validate.argument_spec()
    assert spec_drift(gpu_pod_validate, spec) == []
    assert doc["extends_documentation_fragment"] == [
        "kubegpu.scheduling.options.sources",
        "kubegpu.scheduling.options.fail_on",
        "kubegpu.scheduling.options.gpu_resources",
        "kubegpu.scheduling.options.system_components",
        "kubegpu.scheduling.read_only",
        "kubegpu.scheduling.connection",
    ]
    read_only = yaml.safe_load(read_only_fragment.ModuleDocFragment.DOCUMENTATION)
    assert read_only["attributes"]["check_mode"]["support"] == "full"
    assert set(AUTH_ARG_SPEC) <= set(spec)


def test_every_rule_is_documented_and_returns_are_documented():
    description = " ".join(documented("DOCUMENTATION")["description"])
    assert all(f"V({rule})" in description or rule.startswith("KGPU40") for rule in RULES)
    assert set(documented("RETURN")) == {
        "findings",
        "allowed",
        "not_checked",
        "errors",
        "counts",
        "summary",
        "notes",
        "report",
        "report_text",
        "admission",
        "api_requests",
    }
    examples = documented("EXAMPLES")
    assert all(task["name"] for task in examples)


def test_gpl_header_comes_first():
    head = (REPO / "plugins" / "modules" / "gpu_pod_validate.py").read_text().splitlines()[:3]
    assert "GNU General Public License v3.0+" in head[1]


# ---------------------------------------------------------------------------------------------
# Offline


def test_bypasses_fail_the_task_with_counts_and_the_first_error(in_fixtures):
    code, result = run_module({"src": ["bad/env-all.yaml", "bad/privileged-plain.yaml"]})
    assert code == 1 and result["failed"] is True and result["changed"] is False
    assert result["msg"].startswith("GPU pod validation failed: 1 error, 1 warning in 2 pod specs from 2 files. ")
    assert [(f["rule"], f["source"], f["line"]) for f in result["findings"]] == [
        ("KGPU101", "bad/env-all.yaml", 21),
        ("KGPU302", "bad/privileged-plain.yaml", 12),
    ]
    assert result["counts"]["by_severity"] == {"error": 1, "warning": 1}
    assert result["report"][0].startswith("bad/env-all.yaml:21: error KGPU101 ")
    assert result["report"][-1] == "1 error, 1 warning in 2 pod specs from 2 files"
    # Kept, deprecated, until 2.0.0.
    assert result["summary"] == result["counts"] and result["report_text"] == result["report"]


def test_legitimate_manifests_pass_and_report_what_was_allowed_and_not_checked(in_fixtures):
    code, result = run_module({"src": ["good", "not-checked/*.yaml"]})
    assert code == 0 and "failed" not in result and result["changed"] is False
    assert result["findings"] == []
    assert [a["rule"] for a in result["allowed"]] == ["KGPU101", "KGPU201", "KGPU301"]
    assert [n["kind"] for n in result["not_checked"]] == ["ConfigMap", "ConfigMap", "Service", "TrainJob"]
    assert result["errors"] == []


@pytest.mark.parametrize(
    "fail_on, code",
    [("error", 0), ("warning", 1), ("never", 0)],
)
def test_fail_on_decides_on_warnings(in_fixtures, fail_on, code):
    exit_code, result = run_module({"src": ["bad/privileged-plain.yaml"], "fail_on": fail_on})
    assert exit_code == code
    assert [f["rule"] for f in result["findings"]] == ["KGPU302"]


def test_skip_rules_gpu_resources_image_env_and_allow_annotation_are_applied():
    definition = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "annotations": {"team/ok": "ci"}},
        "spec": {
            "containers": [
                {"name": "c", "image": "registry.example.com/t:1", "resources": {"requests": {"example.com/tpu": 1}}}
            ]
        },
    }
    _code, plain = run_module({"definition": definition, "fail_on": "never"})
    assert plain["findings"] == []
    _code, configured = run_module(
        {
            "definition": definition,
            "fail_on": "never",
            "resource_names": ["example.com/tpu"],
            "image_env": {"registry.example.com/t:*": {"NVIDIA_VISIBLE_DEVICES": "all"}},
        }
    )
    assert sorted(f["rule"] for f in configured["findings"]) == ["KGPU401", "KGPU501"]
    assert "deprecations" not in configured
    _code, allowed = run_module(
        {
            "definition": definition,
            "fail_on": "never",
            "allow_annotation": "team/ok",
            "skip_rules": ["KGPU401"],
            "image_env": {"registry.example.com/t:1": {"NVIDIA_VISIBLE_DEVICES": "all"}},
        }
    )
    assert allowed["findings"] == []
    assert [(a["rule"], a["allowed_reason"]) for a in allowed["allowed"]] == [("KGPU501", "ci")]


def test_the_earlier_name_gpu_resources_still_works_and_says_it_is_deprecated():
    definition = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "t:1", "resources": {"requests": {"example.com/tpu": 1}}}]},
    }
    _code, result = run_module({"definition": definition, "fail_on": "never", "gpu_resources": ["example.com/tpu"]})
    assert [f["rule"] for f in result["findings"]] == ["KGPU401"]
    (deprecation,) = result["deprecations"]  # its shape differs between ansible-core 2.18 and 2.19
    assert "Alias 'gpu_resources' is deprecated" in json.dumps(deprecation)
    assert deprecation["version"] == "2.0.0"


def test_the_default_resource_names_find_what_no_extra_names_find(in_fixtures):
    """The built-in GPU resources always count: the group's default [nvidia.com/gpu], or any built-in name
    given again, changes no finding of the corpus."""
    corpus = ["bad", "good", "custom-resources", "not-checked"]
    _code, default = run_module({"src": corpus, "fail_on": "never"})
    _code, none = run_module({"src": corpus, "fail_on": "never", "resource_names": []})
    _code, builtins = run_module(
        {"src": corpus, "fail_on": "never", "resource_names": ["nvidia.com/gpu", "nvidia.com/mig-*", "amd.com/gpu"]}
    )
    assert default["findings"] and default["allowed"]
    assert default["findings"] == none["findings"] == builtins["findings"]
    assert default["allowed"] == none["allowed"] == builtins["allowed"]
    assert default["counts"] == none["counts"] == builtins["counts"]


def test_a_yaml_string_definition_gets_lines():
    text = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  runtimeClassName: nvidia\n  containers: [{name: c}]\n"
    )
    code, result = run_module({"definition": text})
    assert code == 0
    assert [(f["rule"], f["source"], f["line"]) for f in result["findings"]] == [("KGPU601", "definition", 5)]


def test_files_that_cannot_be_loaded_are_listed_and_fail_the_task(tmp_path, in_fixtures):
    broken = tmp_path / "broken.yaml"
    broken.write_bytes(b"kind: Pod\nname: \xff\n")
    code, result = run_module({"src": [str(broken), "good/gpu-limits.yaml"]})
    assert code == 1
    assert result["errors"] == [
        {
            "source": str(broken),
            "document": None,
            "line": 2,
            "message": "not valid UTF-8: byte 0xff at offset 16 (line 2); save the file as UTF-8",
        }
    ]
    assert result["counts"]["objects_checked"] == 1
    assert result["msg"].endswith("save the file as UTF-8")
    code, _result = run_module({"src": [str(broken)], "fail_on": "never"})
    assert code == 0


def test_reports_are_written_in_check_mode_too(tmp_path, in_fixtures):
    args = {
        "src": ["bad/env-all.yaml"],
        "fail_on": "never",
        "report_json": str(tmp_path / "r" / "report.json"),
        "report_sarif": str(tmp_path / "r" / "report.sarif"),
        "report_junit": str(tmp_path / "r" / "report.xml"),
    }
    code, result = run_module(args, check_mode=True)
    assert code == 0 and result["changed"] is False
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["findings"] == result["findings"]
    sarif = json.loads((tmp_path / "r" / "report.sarif").read_text())
    assert sarif["runs"][0]["results"][0]["ruleId"] == "KGPU101"
    junit = ElementTree.parse(tmp_path / "r" / "report.xml").getroot()
    [case] = junit.iter("testcase")
    assert case.get("name").startswith("KGPU101 ") and case.find("failure") is None, "fail_on never fails nothing"
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == ["report.json", "report.sarif", "report.xml"]


def test_the_junit_report_fails_what_fails_the_task(tmp_path, in_fixtures):
    target = tmp_path / "junit.xml"
    code, _result = run_module({"src": ["bad/env-all.yaml", "bad/privileged-plain.yaml"], "report_junit": str(target)})
    assert code == 1
    junit = ElementTree.parse(target).getroot()
    assert (junit.get("tests"), junit.get("failures")) == ("2", "1")
    code, _result = run_module(
        {"src": ["bad/privileged-plain.yaml"], "fail_on": "warning", "report_junit": str(target)}
    )
    assert code == 1 and ElementTree.parse(target).getroot().get("failures") == "1"


@pytest.mark.parametrize(
    "args, message",
    [
        ({}, "one of src, definition or live=true is required"),
        ({"src": ["x"], "skip_rules": ["KGPU999"]}, "skip_rules: unknown rule id(s) KGPU999"),
        ({"src": ["x"], "image_env": {"img": "all"}}, "image_env: the env of image 'img' must be a map"),
        ({"src": ["x"], "max_file_size": 0}, "max_file_size must be positive"),
        ({"src": ["x"], "fail_on": "sometimes"}, "value of fail_on must be one of"),
    ],
)
def test_bad_arguments_fail_with_a_clear_message(args, message):
    code, result = run_module(args)
    assert code == 1 and result["failed"] is True
    assert message in result["msg"]


def test_an_unwritable_report_fails_the_task(tmp_path, in_fixtures):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, result = run_module({"src": ["good/dra.yaml"], "report_json": str(blocker / "report.json")})
    assert code == 1 and result["msg"].startswith("cannot write report")


# ---------------------------------------------------------------------------------------------
# Live, against a fake client

SECRET_VALUE = "GPU-feedface-0000-secret"


class FakeClient:
    def __init__(self, pods, objects):
        self.pods = pods
        self.objects = objects
        self.request_count = 0

    def list_items(self, path):
        self.request_count += 1
        return iter(self.pods if path.endswith("/pods") else [])

    def get(self, path):
        self.request_count += 1
        if path not in self.objects:
            raise ClusterError("not found", 404)
        return self.objects[path]


def pod(name, env=None, env_from=None, annotations=None):
    container = {"name": "main", "image": "busybox"}
    if env:
        container["env"] = env
    if env_from:
        container["envFrom"] = env_from
    return {
        "metadata": {"name": name, "namespace": "ml", "uid": name, "annotations": annotations or {}},
        "spec": {"containers": [container]},
        "status": {"phase": "Running"},
    }


def test_live_mode_finds_bypasses_in_running_pods_and_never_returns_secret_values(monkeypatch, tmp_path):
    pods = [
        pod("from-secret", env_from=[{"secretRef": {"name": "gpu-secret"}}]),
        pod("from-config", env_from=[{"prefix": "NVIDIA_", "configMapRef": {"name": "gpu-env"}}]),
        pod(
            "allowed",
            env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}],
            annotations={"kubegpu.io/allow-bypass": "driver validator"},
        ),
        pod("clean"),
    ]
    objects = {
        "/api/v1/namespaces/ml/secrets/gpu-secret": {
            "data": {"NVIDIA_VISIBLE_DEVICES": base64.b64encode(SECRET_VALUE.encode()).decode()}
        },
        "/api/v1/namespaces/ml/configmaps/gpu-env": {"data": {"VISIBLE_DEVICES": "all"}},
    }
    seen_params = {}

    def fake_client_from_params(params):
        seen_params.update(params)
        return FakeClient(pods, objects)

    monkeypatch.setattr(api_module, "client_from_params", fake_client_from_params)
    out = io.StringIO()
    with (
        patch_module_args(
            {"live": True, "api_key": "t0ken", "namespaces": ["ml"], "report_sarif": str(tmp_path / "live.sarif")}
        ),
        redirect_stdout(out),
        pytest.raises(SystemExit),
    ):
        gpu_pod_validate.main()
    raw = out.getvalue()
    result = json.loads(raw)
    assert seen_params["api_key"] == "t0ken"
    assert [(f["rule"], f["object_name"], f["source"]) for f in result["findings"]] == [
        ("KGPU101", "from-secret", "cluster"),
        ("KGPU101", "from-config", "cluster"),
    ]
    assert [(a["object_name"], a["allowed_reason"]) for a in result["allowed"]] == [("allowed", "driver validator")]
    assert SECRET_VALUE not in raw
    assert "t0ken" not in raw
    assert result["notes"][0].startswith("live: checked 0 workloads and 4 pods in full")
    sarif = json.loads((tmp_path / "live.sarif").read_text())
    jsonschema.validate(sarif, json.loads(SARIF_SCHEMA.read_text()), format_checker=jsonschema.FormatChecker())
    assert [r["locations"][0]["physicalLocation"]["artifactLocation"] for r in sarif["runs"][0]["results"]] == [
        {"uri": f"api/v1/namespaces/ml/pods/{name}", "uriBaseId": "KUBERNETES_API"}
        for name in ("from-secret", "from-config", "allowed")
    ]
    assert SECRET_VALUE not in (tmp_path / "live.sarif").read_text()
    assert result["api_requests"] >= 3  # the pod list, the Secret and the ConfigMap


def test_live_mode_cluster_errors_fail_cleanly(monkeypatch):
    def unreachable(params):
        raise ClusterError("cannot reach the API server at https://127.0.0.1:1: connection refused")

    monkeypatch.setattr(api_module, "client_from_params", unreachable)
    code, result = run_module({"live": True})
    assert code == 1
    assert result["msg"] == "cannot reach the API server at https://127.0.0.1:1: connection refused"


# ---------------------------------------------------------------------------------------------
# The command line (pre-commit and CI)


def cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = validate_cli.run(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_cli_exit_codes_follow_fail_on(in_fixtures):
    assert cli("good")[0] == 0
    code, out, _err = cli("bad/env-all.yaml")
    assert code == 1
    assert out.startswith("bad/env-all.yaml:21: error KGPU101 Deployment ml/env-all")
    assert cli("bad/privileged-plain.yaml")[0] == 0
    assert cli("--fail-on", "warning", "bad/privileged-plain.yaml")[0] == 1
    assert cli("--fail-on", "never", "bad/env-all.yaml")[0] == 0
    assert cli("--skip-rule", "KGPU101,KGPU302", "bad/env-all.yaml", "bad/privileged-plain.yaml")[0] == 0


@pytest.mark.parametrize(
    "argv, message",
    [
        ((), "no paths given"),
        (("--skip-rule", "KGPU000", "good"), "unknown rule id(s): KGPU000"),
        (("--max-file-size", "0", "good"), "--max-file-size must be positive"),
        (("--image-env", "missing.yaml", "good"), "--image-env missing.yaml: cannot read the file"),
    ],
)
def test_cli_usage_errors_exit_2(in_fixtures, argv, message):
    code, _out, err = cli(*argv)
    assert code == 2
    assert message in err


def test_cli_bad_option_exits_2_and_list_rules_exits_0(capsys):
    assert validate_cli.run(["--fail-on", "maybe", "x"]) == 2
    code, out, _err = cli("--list-rules")
    assert code == 0 and len(out.splitlines()) == len(RULES)


def test_cli_writes_reports_and_reads_an_image_env_file(tmp_path, in_fixtures):
    image_env = tmp_path / "images.yaml"
    image_env.write_text("registry.example.com/ml/train:1.0:\n  NVIDIA_VISIBLE_DEVICES: all\n")
    sarif, report, junit = tmp_path / "out.sarif", tmp_path / "out.json", tmp_path / "junit" / "out.xml"
    code, out, _err = cli(
        "-q",
        "--image-env",
        str(image_env),
        "--gpu-resource",
        "example.com/*",
        "--sarif",
        str(sarif),
        "--json",
        str(report),
        "--junit",
        str(junit),
        "bad/runtime-class.yaml",
    )
    assert code == 0
    assert out.strip() == "0 errors, 2 warnings in 1 pod spec from 1 file"
    assert sorted(r["ruleId"] for r in json.loads(sarif.read_text())["runs"][0]["results"]) == ["KGPU501", "KGPU601"]
    assert json.loads(report.read_text())["summary"]["findings"] == 2
    cases = list(ElementTree.parse(junit).getroot().iter("testcase"))
    assert sorted(c.get("name").split()[0] for c in cases) == ["KGPU501", "KGPU601"]
    assert all(c.find("failure") is None for c in cases)


def test_cli_junit_fails_warnings_with_fail_on_warning(tmp_path, in_fixtures):
    junit = tmp_path / "out.xml"
    code, _out, _err = cli("--fail-on", "warning", "--junit", str(junit), "bad/privileged-plain.yaml")
    assert code == 1
    [case] = ElementTree.parse(junit).getroot().iter("testcase")
    assert case.find("failure").get("type") == "KGPU302 warning"


def run_in(folder: Path, env: dict[str, str], *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, timeout=60, check=False)


def test_the_script_runs_from_anywhere_without_ansible_on_the_path(tmp_path):
    manifest = tmp_path / "deploy.yaml"
    manifest.write_text((FIXTURES / "bad" / "env-all.yaml").read_text())
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "ANSIBLE_COLLECTIONS_PATH")}
    done = run_in(tmp_path, env, sys.executable, "-I", str(SCRIPT), "deploy.yaml")
    assert done.returncode == 1, done.stderr
    assert done.stdout.startswith("deploy.yaml:21: error KGPU101")
    assert done.stderr == ""
    usage = run_in(tmp_path, env, sys.executable, "-I", str(SCRIPT))
    assert usage.returncode == 2 and "no paths given" in usage.stderr


def test_the_script_starts_as_a_program_the_way_pre_commit_runs_it(tmp_path):
    """The first lines are a shell prologue that hands the file to python3 from PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # This environment's interpreter as python3 (a link would run the base interpreter, without PyYAML).
    wrapper = bin_dir / "python3"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    (tmp_path / "ok.yaml").write_text((FIXTURES / "good" / "dra.yaml").read_text())
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)}
    done = run_in(tmp_path, env, str(SCRIPT), "--fail-on", "warning", "ok.yaml")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0 errors, 0 warnings in 1 pod spec from 1 file"


def test_the_pre_commit_hook_runs_the_script():
    [hook] = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "gpu-pod-validate"
    assert (REPO / hook["entry"]).is_file() and os.access(REPO / hook["entry"], os.X_OK)
    assert hook["language"] == "script" and hook["require_serial"] is True
