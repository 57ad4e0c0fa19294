"""gpu-pod-validate --jobs N gives the serial run's output byte for byte; `-` reads standard input."""

import io
import json
import shutil
from pathlib import Path

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate import cli as validate_cli
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.checker import RuleConfig
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.manifests import load_manifests
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.report import json_report, offline_report

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "manifests"

CONFIGMAP = """apiVersion: v1
kind: ConfigMap
metadata: {name: gpu-settings, namespace: team}
data: {DEVICES: all}
"""
READS_CONFIGMAP = """apiVersion: apps/v1
kind: Deployment
metadata: {name: reads-configmap, namespace: team}
spec:
  template:
    spec:
      containers:
        - name: main
          image: app:1
          envFrom:
            - prefix: NVIDIA_VISIBLE_
              configMapRef: {name: gpu-settings}
"""


def run(argv, stdin=None):
    out, err = io.StringIO(), io.StringIO()
    code = validate_cli.run(list(argv), stdout=out, stderr=err, stdin=stdin)
    return code, out.getvalue(), err.getvalue()


def outputs(tmp_path, name, *argv, stdin=None):
    reports = {kind: tmp_path / f"{name}.{kind}" for kind in ("json", "sarif", "junit")}
    code, text, err = run(
        [
            "--fail-on",
            "never",
            "-v",
            *argv,
            "--json",
            str(reports["json"]),
            "--sarif",
            str(reports["sarif"]),
            "--junit",
            str(reports["junit"]),
        ],
        stdin=stdin,
    )
    assert code == 0 and err == ""
    return [text] + [path.read_bytes() for path in reports.values()]


@pytest.fixture
def corpus(tmp_path, monkeypatch):
    """The project's manifest fixtures, plus files whose ConfigMap is read from another file."""
    root = tmp_path / "corpus"
    shutil.copytree(FIXTURES, root)
    (root / "zz-cross").mkdir()
    (root / "zz-cross" / "a-reads.yaml").write_text(READS_CONFIGMAP)
    (root / "zz-cross" / "z-configmap.yaml").write_text(CONFIGMAP)
    monkeypatch.chdir(tmp_path)
    return "corpus"


def test_jobs_gives_the_serial_output_byte_for_byte(corpus, tmp_path):
    serial = outputs(tmp_path, "serial", "--jobs", "1", corpus)
    parallel = outputs(tmp_path, "parallel", "--jobs", "2", corpus)
    assert parallel == serial
    assert "corpus/zz-cross/a-reads.yaml:12: error KGPU101" in serial[0]  # resolved from the later file
    assert len(list(Path(corpus).rglob("*.yaml"))) > 16 and serial[0].count(": error KGPU") > 10


def test_stdin_in_the_middle_of_files_with_jobs(corpus, tmp_path):
    first, last = f"{corpus}/bad", f"{corpus}/zz-cross"
    stdin = (FIXTURES / "bad" / "env-all.yaml").read_bytes()
    serial = outputs(tmp_path, "serial", "--jobs", "1", first, "-", last, stdin=io.BytesIO(stdin))
    parallel = outputs(tmp_path, "parallel", "--jobs", "2", first, "-", last, stdin=io.BytesIO(stdin))
    assert parallel == serial
    assert "<stdin>:21: error KGPU101" in serial[0]


def test_stdin_yaml_stream_is_named_and_located_as_a_file_would_be(tmp_path, monkeypatch):
    monkeypatch.chdir(FIXTURES)
    text = Path("bad/env-all.yaml").read_text() + "---\n" + Path("bad/privileged-plain.yaml").read_text()
    code, out, err = run(
        ["-", "--json", str(tmp_path / "r.json"), "--sarif", str(tmp_path / "r.sarif")], stdin=io.BytesIO(text.encode())
    )
    assert code == 1 and err == ""
    lines = text.splitlines()
    findings = json.loads((tmp_path / "r.json").read_text())["findings"]
    assert [(f["rule"], f["source"]) for f in findings] == [("KGPU101", "<stdin>"), ("KGPU302", "<stdin>")]
    assert [lines[f["line"] - 1].strip() for f in findings] == ["value: all", 'add: ["NET_ADMIN", "SYS_ADMIN"]']
    assert out.startswith("<stdin>:21: error KGPU101")
    assert out.rstrip().endswith("from 1 file")
    sarif = json.loads((tmp_path / "r.sarif").read_text())
    location = sarif["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
    assert location["region"]["startLine"] == 21 and "stdin" in location["artifactLocation"]["uri"]


def test_stdin_json_values_one_after_another():
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {
            "containers": [{"name": "m", "image": "a", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "0"}]}]
        },
    }
    text = json.dumps({"kind": "List", "apiVersion": "v1", "items": []}) + "\n" + json.dumps(pod, indent=1)
    code, out, _err = run(["-"], stdin=io.BytesIO(text.encode()))
    assert code == 1 and out.startswith("<stdin>:")
    assert "KGPU101 Pod p" in out and "in 1 pod spec from 1 file" in out


def test_unreadable_stdin_is_a_load_error_in_its_place():
    code, out, _err = run(["-"], stdin=io.BytesIO(b"a: [\n"))
    assert code == 1 and out.startswith("<stdin>:2: cannot load: YAML error in document 0")
    code, out, _err = run(["--max-file-size", "3", "-"], stdin=io.BytesIO(b"a: 1\n"))
    assert code == 1 and "<stdin>: cannot load: standard input has more than 3 bytes" in out


def test_jobs_must_be_positive():
    code, _out, err = run(["--jobs", "0", "x.yaml"])
    assert code == 2 and "--jobs must be 1 or more" in err


def test_the_modules_definition_comes_last_in_a_parallel_run_too(corpus):
    definition = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "gpu-settings", "namespace": "team"},
            "data": {"DEVICES": "void"},
        }
    ]  # wins over the file's: the finding goes away

    def report(jobs):
        return offline_report(load_manifests([f"{corpus}/good", f"{corpus}/zz-cross"], definition), RuleConfig(), jobs)

    serial, parallel = report(1), report(2)
    assert json.dumps(json_report(parallel)) == json.dumps(json_report(serial))
    assert not [f for f in serial.findings if f.ref.name == "reads-configmap"]
    assert serial.files == parallel.files > 2
