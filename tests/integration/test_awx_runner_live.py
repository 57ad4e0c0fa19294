"""The job templates of extensions/awx/ run as AWX runs them: by ansible-runner, on a private data folder built as AWX
builds it for a job, against the local cluster.

For each job template: the project (this collection's playbooks/) in `project/`, the collection installed from its
built tarball on ANSIBLE_COLLECTIONS_PATH (as an execution environment holds it), the credential type's injectors
applied to a self-contained kubeconfig of the local cluster (the file under `env/`, the variables in
`env/envvars`), the survey's defaults with an operator's answer to each required question without one in
`env/extravars`, the template's job type and diff mode in `env/cmdline`, and the inventory host of
extensions/awx/configuration/inventories.yml in `inventory/`. The run must succeed; the acting templates, dry runs
by default, must plan and write nothing (the API server's request counters, and the cluster as it was). Then, as
the workflow runs them after its approvals, the quarantine launched as run quarantines a KWOK GPU node of the
test's own and the release launched as run proves and releases it; the node is deleted afterwards.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ansible_runner
import jinja2
import jinja2.sandbox
import pytest
import yaml
from conftest import REPO_ROOT, ClusterState, LocalCluster, wait_until

from ansible_collections.kubegpu.scheduling.plugins.module_utils.node_release.release import (
    PROOF_NAMESPACE,
    SAMPLE_TOLERATIONS,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.ownership import (
    QUARANTINE_TAINT_KEY,
    RECORD_ANNOTATION,
)
from tests.cluster import fleet as fleet_file
from tests.cluster.counters import api_requests, sent_since, writes_on
from tests.versions import smoke

pytestmark = pytest.mark.cluster

CONFIGURATION = REPO_ROOT / "extensions" / "awx" / "configuration"
BIN = Path(sys.executable).parent
# What the runbooks write: nodes, pods (evictions included), namespaces and DRA objects; not the status
# subresources KWOK keeps writing.
WATCHED = ("nodes", "pods", "namespaces", "devicetaintrules", "resourceclaims", "resourceslices")


def load(name: str) -> dict[str, Any]:
    data = yaml.safe_load((CONFIGURATION / name).read_text())
    assert isinstance(data, dict)
    return data


def rendered_once(value: Any) -> Any:
    """A value as the configuration roles hand it to the controller: its Jinja rendered once."""
    if isinstance(value, str):
        return jinja2.Environment().from_string(value).render()
    if isinstance(value, dict):
        return {k: rendered_once(v) for k, v in value.items()}
    if isinstance(value, list):
        return [rendered_once(v) for v in value]
    return value


TEMPLATES = {t["name"]: t for t in load("job_templates.yml")["controller_templates"]}
[CREDENTIAL_TYPE] = load("credential_types.yml")["controller_credential_types"]
[HOST] = load("inventories.yml")["controller_hosts"]
ACTING = ("kubegpu GPU node quarantine", "kubegpu GPU node release", "kubegpu GPU device quarantine")


def terminating_namespaces(cluster: LocalCluster) -> list[str]:
    namespaces = cluster.get("/api/v1/namespaces")["items"]
    return [n["metadata"]["name"] for n in namespaces if n["metadata"].get("deletionTimestamp")]


def writes(cluster: LocalCluster) -> Counter:
    """Write requests the API server has answered on what the runbooks write (tests/cluster/counters.py)."""
    return api_requests(cluster, writes_on(*WATCHED))


def self_contained_kubeconfig(path: Path) -> str:
    """The kubeconfig text an operator pastes into the credential: files inlined as *-data."""
    config = yaml.safe_load(path.read_text())
    inline = {"certificate-authority": "certificate-authority-data"}
    inline |= {"client-certificate": "client-certificate-data", "client-key": "client-key-data"}
    for entry in [*config["clusters"], *config["users"]]:
        body = entry.get("cluster") or entry.get("user")
        for key, data_key in inline.items():
            if key in body:
                body[data_key] = base64.b64encode(Path(body.pop(key)).read_bytes()).decode()
    return yaml.safe_dump(config)


def inject(credential_type: dict[str, Any], inputs: dict[str, str], env_folder: Path) -> dict[str, str]:
    """The credential type's injectors applied as AWX applies them: each file template rendered into a file of the
    private data folder, then the environment rendered with `tower.filename.<name>` naming those files. The
    injectors are those the configuration role sends ("{  {" made "{{")."""
    sandbox = jinja2.sandbox.ImmutableSandboxedEnvironment(undefined=jinja2.StrictUndefined)
    injectors = json.loads(json.dumps(credential_type["injectors"]).replace("{  {", "{{"))
    filenames = {}
    for key, template in injectors.get("file", {}).items():
        name = key.split(".", 1)[1]
        path = env_folder / f"{name}-credential"
        path.write_text(sandbox.from_string(template).render(**inputs))
        path.chmod(0o600)
        filenames[name] = str(path)
    context = {**inputs, "tower": {"filename": filenames}}
    return {k: sandbox.from_string(v).render(**context) for k, v in injectors["env"].items()}


def survey_extravars(template: dict[str, Any], answers: dict[str, Any]) -> dict[str, Any]:
    """What AWX passes: each survey question's default, or its answer; and the other variables given at launch,
    where the template asks for variables on launch."""
    asked = {q["variable"] for q in template["survey_spec"]["spec"]}
    beyond = set(answers) - asked
    assert not beyond or template.get("ask_variables_on_launch"), f"{template['name']} refuses {beyond}"
    extravars = {k: answers[k] for k in beyond}
    for question in template["survey_spec"]["spec"]:
        variable = question["variable"]
        if variable in answers:
            extravars[variable] = answers[variable]
        elif question.get("default") not in (None, ""):
            extravars[variable] = question["default"]
        else:
            assert not question["required"], f"{template['name']}: the test gives no answer to {variable}"
    return extravars


@pytest.fixture(scope="module")
def collections(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The collection installed from its built tarball, as the execution environment holds it."""
    folder = tmp_path_factory.mktemp("ee")

    def run(*argv: str) -> None:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stdout + done.stderr

    run(str(BIN / "ansible-galaxy"), "collection", "build", str(REPO_ROOT), "--output-path", str(folder))
    [tarball] = folder.glob("kubegpu-scheduling-*.tar.gz")
    run(str(BIN / "ansible-galaxy"), "collection", "install", "--force", str(tarball), "-p", str(folder / "c"))
    return folder / "c"


@pytest.fixture(scope="module")
def job(cluster: LocalCluster, collections: Path, tmp_path_factory: pytest.TempPathFactory):
    """Run a job template as AWX would: (runner, events) for a template name and the operator's answers."""
    kubeconfig = self_contained_kubeconfig(cluster.kubeconfig)

    def launch(name: str, answers: dict[str, Any], job_type: str | None = None) -> tuple[Any, list[dict[str, Any]]]:
        """`job_type`: the job type chosen at launch (or by a workflow node), where the template asks for it."""
        template = TEMPLATES[name]
        assert job_type is None or template.get("ask_job_type_on_launch"), name
        private = tmp_path_factory.mktemp("job")
        (private / "env").mkdir()
        shutil.copytree(REPO_ROOT / "playbooks", private / "project" / "playbooks")
        envvars = inject(CREDENTIAL_TYPE, {"kubeconfig": kubeconfig}, private / "env")
        envvars |= {
            # ansible-playbook of this environment, as the execution environment's is on its PATH.
            "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
            "ANSIBLE_COLLECTIONS_PATH": str(collections),
            "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "false",
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_LOCALHOST_WARNING": "false",
        }
        (private / "env" / "envvars").write_text(json.dumps(envvars))
        (private / "env" / "extravars").write_text(json.dumps(survey_extravars(template, answers)))
        flags = ["--check"] if (job_type or template["job_type"]) == "check" else []
        flags += ["--diff"] if template.get("diff_mode") else []
        (private / "env" / "cmdline").write_text(" ".join(flags))
        (private / "inventory").mkdir()
        host_vars = rendered_once(HOST["variables"])
        (private / "inventory" / "hosts.json").write_text(json.dumps({"all": {"hosts": {HOST["name"]: host_vars}}}))
        runner = ansible_runner.run(
            private_data_dir=str(private),
            playbook=template["playbook"],
            quiet=True,
            timeout=120,
        )
        return runner, list(runner.events)

    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("K8S_AUTH_") or k == "KUBECONFIG"}
    try:
        yield launch
    finally:
        os.environ.update(saved)


def task_results(events: list[dict[str, Any]], task: str) -> list[dict[str, Any]]:
    return [
        e["event_data"]["res"] for e in events if e["event"] == "runner_on_ok" and e["event_data"].get("task") == task
    ]


def output(runner: Any) -> str:
    return runner.stdout.read()[-4000:]


def test_the_read_only_templates_succeed(job, tmp_path: Path):
    runner, events = job("kubegpu GPU preflight", {})
    assert (runner.status, runner.rc) == ("successful", 0), output(runner)
    assert not [e for e in events if e["event_data"].get("res", {}).get("changed")]

    report = tmp_path / "report"
    runner, events = job("kubegpu GPU fleet report", {"kubegpu_report_dir": str(report)})
    assert (runner.status, runner.rc) == ("successful", 0), output(runner)
    read = (
        "Read the fleet facts, the device plugin, the running pods and where GPU work fits in one read of the cluster"
    )
    assert [r for r in task_results(events, read) if r.get("fleet")]
    assert any(report.iterdir())


def test_the_acting_templates_dry_run_by_default_plan_and_write_nothing(job, cluster: LocalCluster):
    device = smoke.first_device(str(cluster.kubeconfig), smoke.DRA_NODE)
    answers = {
        "kubegpu GPU node quarantine": {
            "node_quarantine_nodes": smoke.CHECKED_NODE,
            "node_quarantine_reason": "AWX dry run",
            # The only node of its model: a share of 1 lets the breaker plan its quarantine.
            "node_quarantine_max_share": 1.0,
        },
        "kubegpu GPU node release": {"node_release_nodes": smoke.CHECKED_NODE},
        "kubegpu GPU device quarantine": {
            "device_quarantine_devices": " ".join(f"{k}={v}" for k, v in device.items()),
            "device_quarantine_reason": "AWX dry run",
            "device_quarantine_max_share": 1.0,
        },
    }
    # A namespace an earlier test deleted is still being emptied and finalized by the controller manager, whose
    # writes the counters would take for the runbooks'.
    wait_until(lambda: not terminating_namespaces(cluster), timeout=120, what="earlier tests' namespaces to go")
    before, state = writes(cluster), ClusterState.read(cluster)
    for name in ACTING:
        assert TEMPLATES[name]["job_type"] == "check"
        runner, events = job(name, answers[name])
        assert (runner.status, runner.rc) == ("successful", 0), f"{name}\n{output(runner)}"
        changed = [e for e in events if e["event"] == "runner_on_ok" and e["event_data"]["res"].get("changed")]
        if name == "kubegpu GPU node release":
            # The node is not quarantined: nothing to prove or release, and it says so.
            [release] = task_results(events, "Release quarantined GPU nodes after a proof pod succeeds on each")
            assert (release["not_quarantined"], changed) == ([smoke.CHECKED_NODE], []), output(runner)
        else:
            assert changed, f"{name} planned nothing\n{output(runner)}"
    assert sent_since(before, writes(cluster)) == {}
    assert state.changes(ClusterState.read(cluster)) == []


# Keeps every other pod off the node made here; the proof pod tolerates it (a launch-time node_release_proof).
TEST_TAINT = {"key": "kubegpu.test/awx", "value": "true", "effect": "NoSchedule"}
CORDON_TAINT = "node.kubernetes.io/unschedulable"


def marks(cluster: LocalCluster, name: str) -> tuple[bool, list[str], bool]:
    """A node's cordon, its taints but the test's and the controller's, and whether it holds a quarantine record."""
    node = cluster.get(f"/api/v1/nodes/{name}")
    ignored = (TEST_TAINT["key"], CORDON_TAINT)
    taints = [t["key"] for t in node["spec"].get("taints", []) if t["key"] not in ignored]
    record = RECORD_ANNOTATION in node["metadata"].get("annotations", {})
    return node["spec"].get("unschedulable", False), taints, record


def settled(cluster: LocalCluster, name: str) -> bool:
    node = cluster.get(f"/api/v1/nodes/{name}")
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in node.get("status", {}).get("conditions", []))
    controller = [t["key"] for t in node["spec"].get("taints", []) if t["key"].startswith("node.kubernetes.io/")]
    return ready and controller == ([CORDON_TAINT] if node["spec"].get("unschedulable") else [])


@pytest.fixture
def kwok_gpu_node(cluster: LocalCluster) -> Iterator[str]:
    """A KWOK GPU node of its own, Ready; deleted afterwards with the proof namespace the release made."""
    name = f"awx-{uuid.uuid4().hex[:6]}"
    had_proof_namespace = cluster.api.request("GET", f"/api/v1/namespaces/{PROOF_NAMESPACE}")[0] == 200
    spec = {"name": name, "cpu": "16", "memory": "64Gi", "labels": {}, "taints": [TEST_TAINT]}
    status, reply = cluster.create("/api/v1/nodes", fleet_file.node_object({**spec, "gpus": 2, "allocatable_gpus": 2}))
    assert status == 201, reply
    try:
        wait_until(lambda: settled(cluster, name), timeout=60, interval=0.2, what=f"{name} Ready")
        yield name
    finally:
        cluster.delete(f"/api/v1/nodes/{name}")
        if not had_proof_namespace:
            cluster.delete(f"/api/v1/namespaces/{PROOF_NAMESPACE}")
            wait_until(
                lambda: cluster.api.request("GET", f"/api/v1/namespaces/{PROOF_NAMESPACE}")[0] == 404,
                timeout=120,
                interval=0.2,
                what=f"namespace {PROOF_NAMESPACE} to go",
            )


def test_the_quarantine_launched_as_run_acts_and_the_release_launched_as_run_undoes_it(
    job, cluster: LocalCluster, kwok_gpu_node: str
):
    """As the workflow's nodes after their approvals: the same templates with the job type run."""
    node = kwok_gpu_node
    quarantine = {"node_quarantine_nodes": node, "node_quarantine_reason": "AWX run", "node_quarantine_max_share": 1.0}
    runner, _events = job("kubegpu GPU node quarantine", quarantine, job_type="run")
    assert (runner.status, runner.rc) == ("successful", 0), output(runner)
    assert marks(cluster, node) == (True, [QUARANTINE_TAINT_KEY], True)

    wait_until(lambda: settled(cluster, node), timeout=60, interval=0.2, what=f"{node} cordon taint")
    proof = {"tolerations": [*SAMPLE_TOLERATIONS, {"key": TEST_TAINT["key"], "operator": "Exists"}]}
    release = {"node_release_nodes": node, "node_release_proof": proof, "node_release_proof_timeout": 60}
    runner, events = job("kubegpu GPU node release", release, job_type="run")
    assert (runner.status, runner.rc) == ("successful", 0), output(runner)
    [result] = task_results(events, "Release quarantined GPU nodes after a proof pod succeeds on each")
    assert result["released"] == [node]
    # The survey's text answer counts as the names it holds.
    [said] = task_results(events, "Say what the next task waits for")
    assert said["msg"].startswith("Proving 1 node(s)"), said["msg"]
    assert marks(cluster, node) == (False, [], False)
