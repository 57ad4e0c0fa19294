import copy
import json
from pathlib import Path
from xml.etree import ElementTree

import jsonschema
import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.paths import collection_paths
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.workloads import ObjectRef
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.checker import RuleConfig
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.documents import Report
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.junit import junit_xml, xml_text
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.manifests import load_manifests
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.reads import live_report
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.report import (
    ReportWriteError,
    failed,
    failure_message,
    format_text,
    json_report,
    merge_reports,
    offline_report,
    result_fields,
    summarize,
    summary_line,
    write_json,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.rules import RULES
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.sarif import object_uri, sarif_report

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "manifests"
SARIF_SCHEMA = Path(__file__).resolve().parents[3] / "fixtures" / "sarif" / "sarif-schema-2.1.0.json"


def assert_valid_sarif(sarif):
    """Valid against the SARIF 2.1.0 schema (formats included), with a physical location on every result."""
    schema = json.loads(SARIF_SCHEMA.read_text())
    validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(sarif)]
    assert errors == []
    for result in sarif["runs"][0]["results"]:
        [location] = result["locations"]
        assert location["physicalLocation"]["artifactLocation"]["uri"], result


@pytest.fixture
def in_fixtures(monkeypatch):
    monkeypatch.chdir(FIXTURES)


def report_of(*paths, definition=None, **config):
    return offline_report(load_manifests(list(paths), definition), RuleConfig(**config))


def test_offline_report_places_findings_on_their_lines(in_fixtures):
    report = report_of("bad/env-all.yaml", "bad/privileged-gpu.yaml", "good")
    lines = Path("bad/env-all.yaml").read_text().splitlines()
    env_all = next(f for f in report.findings if f.ref.source == "bad/env-all.yaml")
    assert lines[env_all.line - 1].strip() == "value: all"
    privileged = next(f for f in report.findings if f.rule == "KGPU301")
    assert Path("bad/privileged-gpu.yaml").read_text().splitlines()[privileged.line - 1].strip() == "privileged: true"
    assert report.files == 2 + len(list(Path("good").glob("*.yaml"))) and report.errors == []
    assert [a.finding.rule for a in report.allowed] == ["KGPU101", "KGPU201", "KGPU301"]


def test_summary_counts_by_severity_and_rule(in_fixtures):
    report = report_of("bad/privileged-gpu.yaml", "bad/privileged-plain.yaml", "good/device-plugin-allowed.yaml")
    summary = summarize(report)
    assert summary["findings"] == 3
    assert summary["by_severity"] == {"error": 1, "warning": 2}
    assert summary["by_rule"] == {
        "KGPU101": {"name": "visible-devices-without-gpu", "severity": "error", "count": 0, "allowed": 1},
        "KGPU201": {"name": "gpu-device-host-path", "severity": "error", "count": 0, "allowed": 1},
        "KGPU301": {"name": "privileged-gpu-container", "severity": "error", "count": 1, "allowed": 1},
        "KGPU302": {"name": "privileged-container", "severity": "warning", "count": 1, "allowed": 0},
        "KGPU501": {"name": "image-visible-devices-all", "severity": "warning", "count": 1, "allowed": 0},
    }
    assert (summary["allowed"], summary["objects_checked"], summary["files"], summary["documents"]) == (3, 3, 3, 3)
    assert summary_line(summary) == "1 error, 2 warnings, 3 allowed in 3 pod specs from 3 files"


@pytest.mark.parametrize(
    "errors, warnings, load_errors, fail_on, verdict",
    [
        (1, 0, 0, "error", True),
        (0, 1, 0, "error", False),
        (0, 1, 0, "warning", True),
        (0, 0, 0, "warning", False),
        (1, 1, 0, "never", False),
        (0, 0, 1, "error", True),
        (0, 0, 1, "warning", True),
        (0, 0, 1, "never", False),
    ],
)
def test_failure_follows_fail_on(errors, warnings, load_errors, fail_on, verdict):
    summary = {
        "findings": errors + warnings,
        "by_severity": {"error": errors, "warning": warnings},
        "load_errors": load_errors,
    }
    assert failed(summary, fail_on) is verdict


def test_failure_message_names_the_first_error(in_fixtures):
    report = report_of("bad/privileged-plain.yaml", "bad/env-all.yaml")
    message = failure_message(report, summarize(report))
    assert message.startswith("GPU pod validation failed: 1 error, 1 warning in 2 pod specs from 2 files. ")
    assert "First: KGPU101 Deployment ml/env-all container 'main': NVIDIA_VISIBLE_DEVICES=all" in message
    broken = report_of("missing.yaml")
    assert failure_message(broken, summarize(broken)).endswith("First: missing.yaml: no such file or directory")


def test_result_fields_and_json_report_are_plain_json(in_fixtures):
    report = report_of("bad/env-all.yaml", "not-checked", "nope.yaml")
    fields = result_fields(report)
    assert set(fields) == {"findings", "allowed", "not_checked", "errors", "summary"}
    assert fields["findings"][0]["rule"] == "KGPU101" and fields["findings"][0]["line"] == 21
    assert [n["kind"] for n in fields["not_checked"]] == ["Service", "TrainJob"]
    assert fields["errors"] == [
        {"source": "nope.yaml", "document": None, "line": None, "message": "no such file or directory"}
    ]
    document = json.loads(json.dumps(json_report(report)))
    assert document["tool"]["name"] == "kubegpu.scheduling.gpu_pod_validate"
    assert document["summary"]["load_errors"] == 1


def test_sarif_report(in_fixtures):
    report = report_of(
        "bad/env-all.yaml", "bad/privileged-plain.yaml", "good/device-plugin-allowed.yaml", "broken.yaml"
    )
    sarif = json.loads(json.dumps(sarif_report(report)))
    assert sarif["version"] == "2.1.0" and sarif["$schema"].endswith("sarif-2.1.0.json")
    [run] = sarif["runs"]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == list(RULES)
    assert all(r["help"]["text"] and r["shortDescription"]["text"] for r in rules)
    assert {r["defaultConfiguration"]["level"] for r in rules} == {"error", "warning"}
    results = run["results"]
    assert [(r["ruleId"], r["level"], "suppressions" in r) for r in results] == [
        ("KGPU101", "error", False),
        ("KGPU302", "warning", False),
        ("KGPU101", "error", True),
        ("KGPU201", "error", True),
        ("KGPU301", "error", True),
    ]
    for result in results:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        assert "Remedy: " in result["message"]["text"]
    first = results[0]["locations"][0]
    assert first["physicalLocation"] == {"artifactLocation": {"uri": "bad/env-all.yaml"}, "region": {"startLine": 21}}
    assert first["logicalLocations"][0]["fullyQualifiedName"] == "Deployment/ml/env-all/main"
    assert results[2]["suppressions"] == [
        {"kind": "inSource", "justification": "NVIDIA device plugin: it hands out the GPUs"}
    ]
    assert len({r["partialFingerprints"]["kubegpuFinding/v1"] for r in results}) == len(results)
    [invocation] = run["invocations"]
    assert invocation["executionSuccessful"] is False
    assert invocation["toolExecutionNotifications"][0]["message"]["text"] == "no such file or directory"
    assert_valid_sarif(sarif)


def test_sarif_locates_inline_definitions_by_the_api_path_they_would_have():
    privileged = {"containers": [{"name": "c", "securityContext": {"privileged": True}}]}
    report = report_of(
        definition=[
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": privileged},
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": {"name": "odd name", "namespace": "ml"},
                "spec": {"template": {"spec": privileged}},
            },
        ]
    )
    sarif = json.loads(json.dumps(sarif_report(report)))
    assert_valid_sarif(sarif)
    locations = [r["locations"][0] for r in sarif["runs"][0]["results"]]
    assert [loc["physicalLocation"] for loc in locations] == [
        {"artifactLocation": {"uri": "api/v1/pods/p", "uriBaseId": "INLINE_DEFINITION"}},
        {
            "artifactLocation": {
                "uri": "apis/apps/v1/namespaces/ml/daemonsets/odd%20name",
                "uriBaseId": "INLINE_DEFINITION",
            }
        },
    ]
    assert locations[0]["logicalLocations"][0]["fullyQualifiedName"] == "Pod/p/c"
    assert set(sarif["runs"][0]["originalUriBaseIds"]) == {"KUBERNETES_API", "INLINE_DEFINITION"}


def test_write_json_creates_directories_atomically_and_reports_failures(tmp_path):
    target = tmp_path / "reports" / "deep" / "out.json"
    write_json(str(target), {"a": 1})
    assert json.loads(target.read_text()) == {"a": 1}
    assert [p.name for p in target.parent.iterdir()] == ["out.json"]
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ReportWriteError, match="cannot write report"):
        write_json(str(blocker / "out.json"), {})


def test_text_output_names_file_line_rule_and_fix(in_fixtures):
    report = report_of("bad/env-all.yaml", "good/device-plugin-allowed.yaml", "not-checked", "missing.yaml")
    text = format_text(report, summarize(report), verbose=True)
    lines = text.splitlines()
    assert lines[0].startswith("bad/env-all.yaml:21: error KGPU101 Deployment ml/env-all container 'main': ")
    assert lines[1] == "    at spec.template.spec.containers[0].env[1].value"
    assert lines[2].startswith("    fix: Remove the variable")
    assert "missing.yaml: cannot load: no such file or directory" in lines
    assert any(
        line.startswith("allowed KGPU201 DaemonSet kube-system/nvidia-device-plugin-daemonset") for line in lines
    )
    assert any(line.startswith("not checked: TrainJob example-train-job") for line in lines)
    assert lines[-1] == summary_line(summarize(report))
    assert "allowed KGPU" not in format_text(report, summarize(report))


# ---------------------------------------------------------------------------------------------
# Live mode against a fake client


def live_object(api_version, kind, name, namespace, uid, spec=None, owner=None, template=True, **extra):
    metadata = {"name": name, "namespace": namespace, "uid": uid}
    if owner:
        metadata["ownerReferences"] = [{"uid": owner, "controller": True}]
    pod_spec = spec or {"containers": [{"name": "main", "image": "busybox"}]}
    body = {"metadata": metadata, **extra}
    if template:
        body["spec"] = {"template": {"metadata": {}, "spec": copy.deepcopy(pod_spec)}}
    else:
        body["spec"] = copy.deepcopy(pod_spec)
    return body


class FakeClient:
    def __init__(self, collections, objects):
        self.collections = collections
        self.objects = objects
        self.listed = []

    def list_items(self, path):
        self.listed.append(path)
        return iter(self.collections.get(path, []))

    def get(self, path):
        if path not in self.objects:
            error = Exception("not found")
            error.status = 404
            raise error
        return self.objects[path]


BYPASS_SPEC = {
    "containers": [
        {"name": "main", "image": "busybox", "envFrom": [{"prefix": "NVIDIA_", "configMapRef": {"name": "gpu-env"}}]}
    ]
}


def cluster_with_bypasses():
    """A Deployment, its ReplicaSet and pods (one with an ephemeral container), and a bare pod."""
    deployment = live_object("apps/v1", "Deployment", "web", "ml", "d1", BYPASS_SPEC)
    replicaset = live_object("apps/v1", "ReplicaSet", "web-abc", "ml", "rs1", BYPASS_SPEC, owner="d1")
    owned_pod = live_object("v1", "Pod", "web-abc-1", "ml", "p1", BYPASS_SPEC, owner="rs1", template=False)
    debug_spec = copy.deepcopy(BYPASS_SPEC)
    debug_spec["ephemeralContainers"] = [
        {"name": "debugger", "image": "busybox", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}
    ]
    debugged_pod = live_object("v1", "Pod", "web-abc-2", "ml", "p2", debug_spec, owner="rs1", template=False)
    bare_pod = live_object(
        "v1",
        "Pod",
        "bare",
        "ml",
        "p3",
        {"containers": [{"name": "c", "image": "busybox", "securityContext": {"privileged": True}}]},
        template=False,
    )
    return FakeClient(
        {
            "/apis/apps/v1/deployments": [deployment],
            "/apis/apps/v1/replicasets": [replicaset],
            "/api/v1/pods": [owned_pod, debugged_pod, bare_pod],
        },
        {"/api/v1/namespaces/ml/configmaps/gpu-env": {"data": {"VISIBLE_DEVICES": "0"}}},
    )


def test_live_report_checks_templates_once_and_resolves_config_maps_from_the_cluster():
    client = cluster_with_bypasses()
    report = live_report(client, RuleConfig())
    assert [(f.rule, f.ref.kind, f.ref.name, f.path) for f in report.findings] == [
        ("KGPU101", "Deployment", "web", "spec.template.spec.containers[0].envFrom[0].configMapRef"),
        ("KGPU302", "Pod", "bare", "spec.containers[0].securityContext.privileged"),
        ("KGPU101", "Pod", "web-abc-2", "spec.ephemeralContainers[0].env[0].value"),
    ]
    assert all(f.ref.source == "cluster" and f.ref.document is None for f in report.findings)
    assert report.objects_checked == 3
    assert report.notes[0].startswith(
        "live: checked 1 workloads and 1 pods in full, and the ephemeral containers of 1 pods; 1 workloads are covered"
    )


def test_live_report_lists_per_namespace_when_asked():
    client = FakeClient({}, {})
    report = live_report(client, RuleConfig(), ["b", "a", "a"])
    assert report.findings == []
    assert "/apis/apps/v1/namespaces/a/deployments" in client.listed
    assert "/api/v1/namespaces/b/pods" in client.listed
    assert "/api/v1/pods" not in client.listed
    assert collection_paths("batch/v1", "cronjobs", None) == ["/apis/batch/v1/cronjobs"]
    assert collection_paths("v1", "pods", ["x y"]) == ["/api/v1/namespaces/x%20y/pods"]


def test_merge_reports_adds_everything_up():
    one = Report(files=1, documents=2, objects_checked=3, notes=["a"])
    two = Report(files=4, documents=5, objects_checked=6, notes=["b"])
    merged = merge_reports([one, two])
    assert (merged.files, merged.documents, merged.objects_checked, merged.notes) == (5, 7, 9, ["a", "b"])


def test_sarif_of_a_live_audit_is_valid_and_locates_every_object_by_its_api_path():
    sarif = json.loads(json.dumps(sarif_report(live_report(cluster_with_bypasses(), RuleConfig()))))
    assert_valid_sarif(sarif)
    results = sarif["runs"][0]["results"]
    assert [r["locations"][0]["physicalLocation"] for r in results] == [
        {"artifactLocation": {"uri": "apis/apps/v1/namespaces/ml/deployments/web", "uriBaseId": "KUBERNETES_API"}},
        {"artifactLocation": {"uri": "api/v1/namespaces/ml/pods/bare", "uriBaseId": "KUBERNETES_API"}},
        {"artifactLocation": {"uri": "api/v1/namespaces/ml/pods/web-abc-2", "uriBaseId": "KUBERNETES_API"}},
    ]
    again = sarif_report(live_report(cluster_with_bypasses(), RuleConfig()))
    assert [r["locations"] for r in again["runs"][0]["results"]] == [r["locations"] for r in results]


@pytest.mark.parametrize(
    "kind, api_version, namespace, name, uri",
    [
        ("Pod", "v1", "ml", "trainer-0", "api/v1/namespaces/ml/pods/trainer-0"),
        ("CronJob", "batch/v1", "ml", "nightly", "apis/batch/v1/namespaces/ml/cronjobs/nightly"),
        ("ReplicationController", "v1", "a b", "rc/1", "api/v1/namespaces/a%20b/replicationcontrollers/rc%2F1"),
        ("Pod", "v1", "", "", "api/v1/pods"),
        ("Widget", "example.com/v1 beta", "ml", "w", "apis/example.com/v1%20beta/namespaces/ml/widgets/w"),
    ],
)
def test_object_uri_is_the_quoted_api_path(kind, api_version, namespace, name, uri):
    assert object_uri(ObjectRef(kind, api_version, namespace, name, source="cluster")) == uri


# ---------------------------------------------------------------------------------------------
# JUnit XML


def junit_of(report, fail_on="error"):
    return ElementTree.fromstring(junit_xml(report, fail_on).encode())


def cases_of(root):
    return {
        (suite.get("name"), case.get("classname"), case.get("name")): case
        for suite in root.iter("testsuite")
        for case in suite.iter("testcase")
    }


def outcome(case):
    children = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
    return children[0] if children else "passed"


def test_junit_has_a_case_per_finding_failing_per_fail_on(in_fixtures):
    report = report_of("bad/env-all.yaml", "bad/privileged-plain.yaml", "good/device-plugin-allowed.yaml")
    root = junit_of(report)
    assert root.tag == "testsuites" and root.get("name") == "kubegpu.scheduling.gpu_pod_validate"
    assert (root.get("tests"), root.get("failures"), root.get("errors"), root.get("skipped")) == ("5", "1", "0", "3")
    assert [s.get("name") for s in root.iter("testsuite")] == [
        "bad/env-all.yaml",
        "bad/privileged-plain.yaml",
        "good/device-plugin-allowed.yaml",
    ]
    cases = cases_of(root)
    env_all = cases[
        (
            "bad/env-all.yaml",
            "Deployment ml/env-all",
            "KGPU101 visible-devices-without-gpu: container main at spec.template.spec.containers[0].env[1].value",
        )
    ]
    failure = env_all.find("failure")
    assert failure.get("type") == "KGPU101 error"
    assert failure.get("message").startswith("error: NVIDIA_VISIBLE_DEVICES=all")
    assert "fix: Remove the variable" in failure.text
    assert (env_all.get("file"), env_all.get("line")) == ("bad/env-all.yaml", "21")
    warning = next(c for key, c in cases.items() if key[2].startswith("KGPU302"))
    assert outcome(warning) == "passed" and "warning KGPU302" in warning.find("system-out").text
    allowed = [c for c in cases.values() if outcome(c) == "skipped"]
    assert [c.find("skipped").get("message") for c in allowed] == [
        "allowed: NVIDIA device plugin: it hands out the GPUs"
    ] * 3
    for suite in root.iter("testsuite"):
        members = list(suite.iter("testcase"))
        assert suite.get("tests") == str(len(members))
        assert suite.get("failures") == str(sum(outcome(c) == "failure" for c in members))

    strict = junit_of(report, "warning")
    assert (strict.get("failures"), strict.get("skipped")) == ("2", "3")
    relaxed = junit_of(report, "never")
    assert (relaxed.get("failures"), relaxed.get("errors")) == ("0", "0")


def test_junit_reports_load_errors_and_a_clean_run(in_fixtures):
    broken = junit_of(report_of("missing.yaml", "good/gpu-limits.yaml"))
    [case] = broken.iter("testcase")
    assert (case.get("classname"), case.get("name"), outcome(case)) == ("missing.yaml", "load file", "error")
    assert case.find("error").get("message") == "no such file or directory"
    assert broken.get("errors") == "1"
    assert outcome(next(junit_of(report_of("missing.yaml"), "never").iter("testcase"))) == "passed"

    clean = junit_of(report_of("good/gpu-limits.yaml"))
    [case] = clean.iter("testcase")
    assert (case.get("name"), outcome(case)) == ("no findings", "passed")
    assert case.find("system-out").text == "0 errors, 0 warnings in 1 pod spec from 1 file"
    assert (clean.get("tests"), clean.get("failures")) == ("1", "0")


def test_junit_of_a_live_audit_groups_the_cluster_findings():
    root = junit_of(live_report(cluster_with_bypasses(), RuleConfig()))
    [suite] = root.iter("testsuite")
    assert suite.get("name") == "cluster"
    assert [(c.get("classname"), outcome(c), c.get("file")) for c in suite.iter("testcase")] == [
        ("Deployment ml/web", "failure", None),
        ("Pod ml/bare", "passed", None),
        ("Pod ml/web-abc-2", "failure", None),
    ]


def test_junit_text_is_always_well_formed_xml():
    assert xml_text("a\x00b\x1bc\td") == "a\\x00b\\x1bc\td"
    definition = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p<&>\x07"},
        "spec": {"containers": [{"name": "c\x01", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "0\x02"}]}]},
    }
    text = junit_xml(report_of(definition=definition), "error")
    root = ElementTree.fromstring(text.encode())
    [case] = root.iter("testcase")
    assert case.get("classname") == "Pod p<&>\\x07"
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>')
