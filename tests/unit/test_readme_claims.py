"""What README.md, CONTRIBUTING.md and docs/ say that can be held without a cluster: the runbooks'
connection variables, the Security section's reads and writes against the code and rbac/, the make
targets, the local cluster's settings, and the files the docs name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from ansible_collections.kubegpu.scheduling.plugins.module_utils.admission.policy import (
    MUTATING_POLICY_NAME,
    PARAMS_NAME,
    VALIDATING_POLICY_NAMES,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.live_objects import (
    LIVE_CLAIM_KINDS,
    LIVE_WORKLOAD_PATHS,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.workload_kinds import WORKLOAD_KINDS

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()
PLAYBOOKS = sorted((REPO / "playbooks").glob("*.yml"))
K8S_GROUP = "group/kubegpu.scheduling.k8s"
# The connection options every runbook passes on from a `kubegpu_<option>` variable.
CONNECTION_VARIABLES = ("kubeconfig", "context", "host", "api_key", "ca_cert", "client_cert", "client_key")
CONNECTION_VARIABLES += ("validate_certs",)


def section(text: str, heading: str) -> str:
    """The text under a Markdown heading, up to the next heading of the same or a higher level."""
    match = re.search(rf"^(#+) {re.escape(heading)}\n", text, re.M)
    assert match, f"no heading {heading!r}"
    level = len(match.group(1))
    rest = text[match.end() :]
    end = re.search(rf"^#{{1,{level}}} ", rest, re.M)
    return rest[: end.start()] if end else rest


def words(text: str) -> str:
    return " ".join(text.split())


def k8s_modules() -> list[str]:
    runtime = yaml.safe_load((REPO / "meta" / "runtime.yml").read_text())
    return runtime["action_groups"]["k8s"]


def reaches_the_cluster(play: dict) -> bool:
    """A play runs a role, or a task of a module of the k8s action group."""
    body = yaml.safe_dump(play.get("tasks") or [])
    modules = (f"kubegpu.scheduling.{m}:" for m in k8s_modules())
    return bool(play.get("roles")) or "include_role" in body or any(m in body for m in modules)


@pytest.mark.parametrize("playbook", PLAYBOOKS, ids=lambda p: p.name)
def test_every_runbook_passes_the_connection_variables_to_the_modules(playbook: Path):
    plays = [p for p in yaml.safe_load(playbook.read_text()) if reaches_the_cluster(p)]
    assert plays, f"{playbook.name} runs nothing against a cluster"
    for play in plays:
        defaults = (play.get("module_defaults") or {}).get(K8S_GROUP)
        assert defaults == {o: f"{{{{ kubegpu_{o} | default(omit) }}}}" for o in CONNECTION_VARIABLES}, (
            f"{playbook.name}, play {play['name']!r}: module_defaults for {K8S_GROUP}"
        )


def test_readme_names_every_connection_variable_of_the_runbooks():
    runbooks = words(section(README, "Runbooks"))
    for option in CONNECTION_VARIABLES:
        assert f"kubegpu_{option}" in runbooks, option


# --- Security: what the collection reads and writes ---------------------------------------------

SECURITY = words(section(README, "What the collection reads and writes"))
# The resources of the reader role that are no workload kind of the code's tables, as the section names them.
READER_RESOURCE_WORDS = {
    "nodes": "nodes",
    "pods": "pods",
    "deviceclasses": "DeviceClasses",
    "resourceslices": "ResourceSlices",
    "devicetaintrules": "DeviceTaintRules",
    "validatingadmissionpolicies": "ValidatingAdmissionPolicies",
    "validatingadmissionpolicybindings": "bindings",
    "configmaps": "ConfigMaps",
}


def plural_kind(kind: str) -> str:
    return kind + ("es" if kind.endswith("s") else "s")


def listed_kinds() -> dict[str, str]:
    """Resource (plural) to kind, for everything the live audit lists."""
    kinds = {resource: kind for _version, kind, resource in LIVE_WORKLOAD_PATHS}
    kinds |= {resource: kind for _group, kind, resource, _versions in LIVE_CLAIM_KINDS}
    kinds |= {k.resource: k.kind for k in WORKLOAD_KINDS}
    return kinds


def test_security_section_names_every_kind_the_live_audit_lists():
    missing = [kind for kind in listed_kinds().values() if kind not in SECURITY and plural_kind(kind) not in SECURITY]
    assert missing == []
    assert "GET /apis" in SECURITY, "discovery"


def test_security_section_names_every_resource_the_reader_role_grants():
    role = yaml.safe_load((REPO / "rbac" / "kubegpu-reader.yaml").read_text())
    kinds = listed_kinds()
    for rule in role["rules"]:
        for resource in rule["resources"]:
            named = READER_RESOURCE_WORDS.get(resource) or kinds[resource]
            assert named in SECURITY, f"{resource} ({rule['apiGroups']})"


def test_security_section_names_every_object_admission_policy_writes():
    for name in (*VALIDATING_POLICY_NAMES, MUTATING_POLICY_NAME, f"kube-system/{PARAMS_NAME}"):
        assert name in SECURITY, name
    writer = yaml.safe_load((REPO / "rbac" / "kubegpu-writer.yaml").read_text())
    admission = [i for i in writer["items"] if i["metadata"]["name"] == "kubegpu-admission-policy"]
    granted = {r for item in admission for rule in item["rules"] for r in rule.get("resourceNames", [])}
    assert granted == {*VALIDATING_POLICY_NAMES, MUTATING_POLICY_NAME, PARAMS_NAME}
