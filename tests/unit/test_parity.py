"""What the docs, role defaults and argument specs say against the constants the code uses.

The constants are the one place each fact lives (label keys, selectors, resource names, rules,
problem texts); everything written elsewhere for people to read is checked against them here.
"""

import re
from pathlib import Path

import pytest
import yaml

from ansible_collections.kubegpu.scheduling.plugins.doc_fragments.connection import (
    ModuleDocFragment as ConnectionFragment,
)
from ansible_collections.kubegpu.scheduling.plugins.doc_fragments.health import (
    ModuleDocFragment as HealthFragment,
)
from ansible_collections.kubegpu.scheduling.plugins.doc_fragments.model_labels import (
    ModuleDocFragment as ModelLabelsFragment,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.catalogue import KINDS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.reference import BEGIN, END, kinds_markdown
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import (
    CHECK_DEVICE_PLUGIN,
    CHECK_FLEET,
    CHECK_HEALTH,
    CHECK_VALIDATOR,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.facts import PROBLEM_TEXT
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.device_plugins import (
    DEFAULT_DEVICE_PLUGIN_SELECTORS,
    DEFAULT_EXEMPT_POD_SELECTORS,
    DEFAULT_PLUGIN_RELEASE,
    PLUGIN_RELEASES,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.health import HEALTH_KINDS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.health_table import (
    BUILTIN_SIGNALS,
    health_argument_spec,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.models import DEFAULT_MODEL_LABEL_KEYS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import NVIDIA_GPU
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.config import (
    AUTH_ARG_SPEC,
    AUTH_ENV_VARS,
    PROXY_HEADERS_ENV_VARS,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.labels.plan import DEFAULT_LABEL_KEY
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.rules import (
    DEFAULT_ALLOW_ANNOTATION,
    RULES,
)
from ansible_collections.kubegpu.scheduling.plugins.modules import (
    gpu_device_plugin,
    gpu_device_plugin_validate,
    gpu_device_quarantine,
    gpu_fleet_report,
    gpu_node_facts,
    gpu_node_label,
    gpu_pod_validate,
)
from tests.documented_options import documented_options

REPO = Path(__file__).resolve().parents[2]
ROLES = sorted(p.name for p in (REPO / "roles").iterdir() if (p / "meta" / "argument_specs.yml").is_file())


def options_of(documentation: str) -> dict:
    return yaml.safe_load(documentation)["options"]


def role_defaults(role: str) -> dict:
    return yaml.safe_load((REPO / "roles" / role / "defaults" / "main.yml").read_text()) or {}


def role_spec(role: str) -> dict:
    spec = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())
    return spec["argument_specs"]["main"]["options"]


def test_model_label_keys_fragment_is_the_constant():
    assert options_of(ModelLabelsFragment.DOCUMENTATION)["model_label_keys"]["default"] == list(
        DEFAULT_MODEL_LABEL_KEYS
    )


def test_connection_fragment_documents_every_connection_option_with_its_aliases():
    documented = options_of(ConnectionFragment.DOCUMENTATION)
    assert set(documented) == set(AUTH_ARG_SPEC)
    for option, spec in AUTH_ARG_SPEC.items():
        assert documented[option].get("aliases", []) == spec.get("aliases", []), option
        assert documented[option]["type"] == spec["type"], option


# kubernetes.core's documented connection options (a pinned copy; the file names its source).
KUBERNETES_CORE_AUTH_OPTIONS = REPO / "tests" / "unit" / "fixtures" / "kubernetes_core" / "k8s_auth_options.yml"
# Its connection options this collection does not take, each with the reason users read.
NOT_TAKEN_FROM_KUBERNETES_CORE: dict[str, str] = {}


def kubernetes_core_options() -> dict:
    return yaml.safe_load(KUBERNETES_CORE_AUTH_OPTIONS.read_text())["options"]


def environment_variables(doc: dict) -> set[str]:
    return set(re.findall(r"K8S_AUTH_[A-Z_]+[A-Z]", " ".join(doc["description"])))


def test_every_connection_option_of_kubernetes_core_is_taken_or_its_absence_explained():
    theirs = kubernetes_core_options()
    missing = sorted(set(theirs) - set(AUTH_ARG_SPEC) - set(NOT_TAKEN_FROM_KUBERNETES_CORE))
    assert not missing, f"kubernetes.core connection options not taken and not explained: {missing}"
    assert set(NOT_TAKEN_FROM_KUBERNETES_CORE) <= set(theirs), "an explained option kubernetes.core does not have"
    for option in set(theirs) & set(AUTH_ARG_SPEC):
        doc, spec = theirs[option], AUTH_ARG_SPEC[option]
        assert spec["type"] == doc.get("type", "str"), option
        assert sorted(spec.get("aliases", [])) == sorted(doc.get("aliases", [])), option
        assert spec.get("elements") == doc.get("elements"), option
        assert set(spec.get("options", {})) == set(doc.get("suboptions", {})), option
        for key, suboption in doc.get("suboptions", {}).items():
            assert spec["options"][key]["type"] == suboption.get("type", "str"), f"{option}.{key}"
            assert environment_variables(suboption) <= {PROXY_HEADERS_ENV_VARS[key]}, f"{option}.{key}"
        assert environment_variables(doc) <= set(AUTH_ENV_VARS.get(option, ())), option


@pytest.mark.parametrize(
    "module",
    [gpu_node_facts, gpu_device_plugin_validate, gpu_device_plugin, gpu_node_label, gpu_pod_validate, gpu_fleet_report],
)
def test_module_argument_spec_defaults_are_the_documented_ones(module):
    documented = options_of(module.DOCUMENTATION)
    for option, spec in module.argument_spec().items():
        if option in documented and "default" in spec:
            assert documented[option].get("default") == spec["default"], f"{module.__name__}: {option}"


def test_gpu_node_facts_documents_the_default_selectors():
    documented = options_of(gpu_node_facts.DOCUMENTATION)
    plugin = documented["device_plugin"]["suboptions"]["label_selectors"]["default"]
    assert plugin == list(DEFAULT_DEVICE_PLUGIN_SELECTORS)
    assert documented["exempt_pod_selectors"]["default"] == list(DEFAULT_EXEMPT_POD_SELECTORS)
    assert documented_options(gpu_node_facts)["resource_names"]["default"] == [NVIDIA_GPU]


def test_gpu_pod_validate_documents_the_allow_annotation():
    assert options_of(gpu_pod_validate.DOCUMENTATION)["allow_annotation"]["default"] == DEFAULT_ALLOW_ANNOTATION


@pytest.mark.parametrize("role", ROLES)
def test_role_defaults_are_the_argument_spec_defaults(role):
    defaults, spec = role_defaults(role), role_spec(role)
    assert set(defaults) <= set(spec), f"{role}: defaults without an argument spec"
    for name, value in defaults.items():
        if "default" in spec[name]:
            assert spec[name]["default"] == value, f"{role}: {name}"


def test_device_quarantine_role_passes_every_module_option_with_the_module_default():
    """The role's variables are the module's options, prefixed, with the same defaults and required the same; the
    role asks for the reason also when the module would not (state absent), so that every run says why."""
    module = {k: v for k, v in gpu_device_quarantine.argument_spec().items() if k not in AUTH_ARG_SPEC}
    spec, defaults = role_spec("device_quarantine"), role_defaults("device_quarantine")
    assert set(spec) == {f"device_quarantine_{option}" for option in module}
    for option, wanted in module.items():
        variable = spec[f"device_quarantine_{option}"]
        assert variable["type"] == wanted["type"], option
        assert variable.get("default") == wanted.get("default") == defaults.get(f"device_quarantine_{option}"), option
        assert variable.get("choices") == wanted.get("choices"), option
    assert spec["device_quarantine_reason"]["required"] and spec["device_quarantine_devices"]["required"]
    devices = spec["device_quarantine_devices"]["options"]
    assert {k: v["required"] for k, v in devices.items()} == {k: True for k in module["devices"]["options"]}
    tasks = yaml.safe_load((REPO / "roles" / "device_quarantine" / "tasks" / "main.yml").read_text())
    [call] = [
        t["kubegpu.scheduling.gpu_device_quarantine"] for t in tasks if "kubegpu.scheduling.gpu_device_quarantine" in t
    ]
    assert call == {option: f"{{{{ device_quarantine_{option} }}}}" for option in module}


def test_node_labels_role_reads_the_model_from_every_vendor_label_but_its_own():
    defaults = role_defaults("node_labels")
    assert defaults["node_labels_key"] == DEFAULT_LABEL_KEY
    assert defaults["node_labels_model_label_keys"] == [k for k in DEFAULT_MODEL_LABEL_KEYS if k != DEFAULT_LABEL_KEY]


def test_roles_name_the_gpu_resource_of_the_code():
    assert role_defaults("device_plugin_check")["device_plugin_check_resource_name"] == NVIDIA_GPU
    assert role_defaults("preflight")["preflight_resource_names"] == [NVIDIA_GPU]


def readme_rule_rows() -> dict[str, str]:
    """Rule id -> severity, from the rule table of docs/ci-validation.md (rows such as KGPU401–407 or KGPU601/602)."""
    rows = {}
    for line in (REPO / "docs" / "ci-validation.md").read_text().splitlines():
        match = re.match(r"^\| (KGPU\d{3})(?:([–/-])(\d{3}))? \| (\w+) \|", line)
        if not match:
            continue
        first, joint, last, severity = match.groups()
        start = int(first[4:])
        ids = [start] if not last else (range(start, int(last) + 1) if joint != "/" else [start, int(last)])
        rows.update({f"KGPU{number}": severity for number in ids})
    return rows


def test_the_rule_table_lists_every_rule_with_its_severity():
    assert readme_rule_rows() == {rule.id: rule.severity for rule in RULES.values()}


def test_gpu_node_facts_documents_every_problem_text_and_kind():
    documentation = " ".join(gpu_node_facts.DOCUMENTATION.split())
    returned = " ".join(gpu_node_facts.RETURN.split())
    for kind, text in PROBLEM_TEXT.items():
        assert f"V({text.format(resource=NVIDIA_GPU)})" in documentation, kind
        assert f"V({kind})" in returned, kind


def documented_kinds(text: str) -> set[str]:
    return set(re.findall(r"V\(([a-z0-9_]+)\)", " ".join(text.split())))


def test_gpu_device_plugin_check_documents_every_kind_of_its_findings():
    kind = yaml.safe_load(gpu_device_plugin_validate.RETURN)["findings"]["contains"]["kind"]
    listed = documented_kinds(" ".join(kind["description"]))
    assert listed == {k.id for k in KINDS.of_check(CHECK_DEVICE_PLUGIN)}


def test_gpu_node_facts_lists_exactly_the_fleet_kinds():
    problems = yaml.safe_load(gpu_node_facts.RETURN)["ansible_facts"]["contains"]["gpu_fleet"]["contains"]["problems"]
    kinds_line = next(line for line in problems["description"] if line.startswith("Kinds:"))
    assert documented_kinds(kinds_line) == {k.id for k in KINDS.of_check(CHECK_FLEET)} == set(PROBLEM_TEXT)


def test_gpu_node_facts_lists_exactly_the_health_kinds():
    nodes = yaml.safe_load(gpu_node_facts.RETURN)["ansible_facts"]["contains"]["gpu_fleet"]["contains"]["nodes"]
    kinds_line = next(line for line in nodes["contains"]["health"]["description"] if line.startswith("Kinds:"))
    assert documented_kinds(kinds_line) == {k.id for k in KINDS.of_check(CHECK_HEALTH)} == set(HEALTH_KINDS)


def test_the_health_fragment_names_every_builtin_signal_and_the_spec_defaults():
    doc = yaml.safe_load(HealthFragment.DOCUMENTATION)
    notes = " ".join(" ".join(doc["notes"]).split())
    named = set(re.findall(r"C\(([A-Za-z./-]+)(?:=(?:True|False))?\)", notes))
    assert {s.name for s in BUILTIN_SIGNALS} <= named
    for signal in BUILTIN_SIGNALS:
        if signal.kind == "condition" and signal.bad_status != "True":
            assert f"C({signal.name}={signal.bad_status})" in notes, signal.name
    suboptions = doc["options"]["health"]["suboptions"]
    spec = health_argument_spec()["options"]
    assert {k: v.get("default") for k, v in suboptions.items()} == {k: v["default"] for k, v in spec.items()}
    assert "kubegpu.scheduling.health" in yaml.safe_load(gpu_node_facts.DOCUMENTATION)["extends_documentation_fragment"]


def test_docs_findings_holds_the_tables_generated_from_the_registry():
    text = (REPO / "docs" / "findings.md").read_text()
    assert BEGIN in text and END in text, "docs/findings.md lost its generated tables"
    held = text[text.index(BEGIN) : text.index(END) + len(END)]
    assert held == kinds_markdown(), (
        "docs/findings.md differs from the registry: regenerate its tables with "
        "python -m ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.reference"
    )
    assert all(f"`{kind_id}`" in held for kind_id in KINDS)


def test_every_validator_kind_is_a_row_of_the_rule_table():
    assert set(readme_rule_rows()) == {k.id for k in KINDS.of_check(CHECK_VALIDATOR)}


def test_the_device_plugin_releases_are_one_table_everywhere():
    spec = role_spec("device_plugin")["device_plugin_version"]
    assert (spec["choices"], spec["default"]) == (list(PLUGIN_RELEASES), DEFAULT_PLUGIN_RELEASE)
    assert role_defaults("device_plugin")["device_plugin_version"] == DEFAULT_PLUGIN_RELEASE
    module_spec = gpu_device_plugin.argument_spec()["version"]
    assert (module_spec["choices"], module_spec["default"]) == (list(PLUGIN_RELEASES), DEFAULT_PLUGIN_RELEASE)
    usage = (REPO / "scripts" / "gpu-plugin-config-validate").read_text()
    assert f"[--release {DEFAULT_PLUGIN_RELEASE}]" in usage
