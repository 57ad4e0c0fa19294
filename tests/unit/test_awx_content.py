"""The AWX / AAP configuration as code (extensions/awx/) against what reads it.

- infra.aap_configuration: each variable is one its dispatch role runs a role for, and its value passes that role's
  published argument spec (tests/unit/fixtures/infra_aap_configuration/) with ansible-core's ArgumentSpecValidator,
  as ansible.builtin.validate_argument_spec does when the role starts; each element also passes the element options
  the spec documents (commented out upstream).
- The collection: each job template runs a playbook of playbooks/; each survey variable is one that playbook reads
  (its role's argument spec, or a variable the playbook names); the survey's defaults, with an answer to each
  required question, pass the role's argument spec.
- AWX: the credential type's injectors use only its own inputs and files, and set the variable the modules read;
  the acting templates are dry runs (check) unless launched as run; in the workflow, an approval comes before
  every node that acts for real.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jinja2
import jinja2.meta
import jinja2.nativetypes
import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.config import AUTH_ENV_VARS

REPO = Path(__file__).resolve().parents[2]
AWX = REPO / "extensions" / "awx"
CONFIGURATION = AWX / "configuration"
PLAYBOOKS = REPO / "playbooks"
UPSTREAM = Path(__file__).parent / "fixtures" / "infra_aap_configuration" / "roles"

# The variable a role reads -> the name its argument spec gives the same list, where they differ (README.md there).
SPEC_NAME = {
    "controller_templates": "controller_job_templates",
    "controller_workflows": "controller_workflow_job_templates",
}
# Corrections to the element options documented (commented out) in the published specs, with the reason.
ERRATA: dict[tuple[str, ...], dict[str, Any]] = {
    # Described as "a dictionary of name, description and timeout" and taken as one by the role and the module.
    ("controller_workflow_job_templates", "simplified_workflow_nodes", "approval_node"): {"type": "dict"},
    # The role sets it to the workflow's name.
    ("controller_workflow_job_templates", "simplified_workflow_nodes", "workflow_job_template"): {"required": False},
    # "Time in seconds to consider an inventory sync to be current", an integer for the role and the module.
    ("controller_inventory_sources", "update_cache_timeout"): {"type": "int"},
}
# The templates that write to the cluster; the others only read.
ACTING = {
    "kubegpu GPU node quarantine": "playbooks/node_quarantine.yml",
    "kubegpu GPU node release": "playbooks/node_release.yml",
    "kubegpu GPU device quarantine": "playbooks/device_quarantine.yml",
}
READ_ONLY = {
    "kubegpu GPU fleet report": "playbooks/fleet_report.yml",
    "kubegpu GPU preflight": "playbooks/preflight.yml",
}
# An answer to each required survey question that has no default, as an operator would give it.
ANSWERS = {
    "node_quarantine_nodes": "gpu-node-17,gpu-node-18",
    "node_quarantine_reason": "XID 79, OPS-1234",
    "node_release_nodes": "gpu-node-17",
    "device_quarantine_devices": "driver=gpu.nvidia.com pool=gpu-node-17 device=gpu-3",
    "device_quarantine_reason": "XID 79, OPS-1234",
}
# The variables of the configuration that configure.yml sets, or the user gives (the kubeconfig, vaulted).
GIVEN_BY_THE_USER = {"kubegpu_awx_kubeconfig"}


def load_configuration() -> dict[str, Any]:
    """Every variable of extensions/awx/configuration/ (and eda/), as include_vars reads them."""
    found: dict[str, Any] = {}
    for path in sorted(CONFIGURATION.rglob("*.yml")):
        data = yaml.safe_load(path.read_text())
        assert not set(found) & set(data), f"{path.name} defines a variable again"
        found.update(data)
    return found


CONFIG = load_configuration()
TEMPLATES = {t["name"]: t for t in CONFIG["controller_templates"]}


def role_reading(variable: str) -> str:
    """The role of infra.aap_configuration that dispatch runs for this variable."""
    dispatch = yaml.safe_load((UPSTREAM / "dispatch" / "defaults" / "main.yml").read_text())
    roles = [
        entry["role"]
        for key, entries in dispatch.items()
        if key.endswith("_dispatcher_roles") and isinstance(entries, list)
        for entry in entries
        if entry["var"] == variable
    ]
    assert roles, f"{variable}: no role of infra.aap_configuration's dispatch reads it"
    return roles[0]


def rendered(value: Any) -> Any:
    """The spec as the validation task receives it: Ansible templates a task's arguments first, so a default such
    as "{{ aap_configuration_secure_logging | default(false) }}" arrives as false when the variable is not set."""
    if isinstance(value, str) and "{{" in value:
        return jinja2.nativetypes.NativeEnvironment().from_string(value).render()
    if isinstance(value, dict):
        return {k: rendered(v) for k, v in value.items()}
    if isinstance(value, list):
        return [rendered(v) for v in value]
    return value


def role_spec(role: str) -> dict[str, Any]:
    specs = yaml.safe_load((UPSTREAM / role / "meta" / "argument_specs.yml").read_text())
    return rendered(specs["argument_specs"]["main"]["options"])


def without_defaults(options: dict[str, Any]) -> dict[str, Any]:
    """The documented options without their defaults: these say in words what the role does when a key is left out
    ("None", "job_template_default", another role variable), and play no part in checking the keys given."""
    return {
        name: {
            key: without_defaults(value) if key == "options" else value
            for key, value in option.items()
            if key != "default"
        }
        for name, option in options.items()
    }


def documented_element_options(role: str, option: str) -> dict[str, Any] | None:
    """The element options the spec keeps commented out below `option`, uncommented, without their defaults, with
    ERRATA applied; None where the spec documents none."""
    lines = (UPSTREAM / role / "meta" / "argument_specs.yml").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(rf"^\s+{option}:\s*$", line))
    indent = len(lines[start]) - len(lines[start].lstrip())
    block: list[str] = []
    for line in lines[start + 1 :]:
        if block and not line.lstrip().startswith("#"):
            break
        if not block and len(line) - len(line.lstrip()) <= indent:
            break
        if re.match(r"^\s*# options:\s*$", line) or block:
            block.append(re.sub(r"^(\s*)# ?", r"\1", line))
    if not block:
        return None
    options = without_defaults(yaml.safe_load(textwrap.dedent("\n".join(block)))["options"])
    for path, fix in ERRATA.items():
        if path[0] == role:
            target = options
            for name in path[1:-1]:
                target = target[name]["options"]
            target[path[-1]].update(fix)
    return options


def validate(spec: dict[str, Any], values: dict[str, Any]) -> list[str]:
    return list(ArgumentSpecValidator(spec).validate(values, validate_role_argument_spec=True).error_messages)


@pytest.mark.parametrize("variable", sorted(CONFIG))
def test_each_variable_passes_the_argument_spec_of_the_role_that_reads_it(variable: str):
    role = role_reading(variable)
    spec = role_spec(role)
    name = SPEC_NAME.get(variable, variable)
    assert name in spec, f"{role}'s argument spec has no {name}"
    # As validate_argument_spec: the variables the spec names, taken from the play's variables.
    assert validate(spec, {name: CONFIG[variable]}) == []
    elements = documented_element_options(role, name)
    if elements is None:
        return
    for element in CONFIG[variable]:
        assert validate(elements, element) == [], element.get("name")


def test_the_element_validation_catches_a_misspelt_or_mistyped_key():
    elements = documented_element_options("controller_job_templates", "controller_job_templates")
    assert elements
    template = dict(TEMPLATES["kubegpu GPU node quarantine"])
    assert validate(elements, template) == []
    assert any("ask_job_type_on_lunch" in e for e in validate(elements, {**template, "ask_job_type_on_lunch": True}))
    assert any("diff_mode" in e for e in validate(elements, {**template, "diff_mode": "sometimes"}))


def jinja_names(value: Any) -> set[str]:
    """The variables the Jinja expressions in these strings (in any nesting) read."""
    environment = jinja2.Environment()
    if isinstance(value, str):
        return set(jinja2.meta.find_undeclared_variables(environment.parse(value)))
    if isinstance(value, dict):
        return set().union(*(jinja_names(v) for v in value.values()), set())
    if isinstance(value, list):
        return set().union(*(jinja_names(v) for v in value), set())
    return set()


def test_the_configuration_reads_only_variables_configure_yml_sets_or_the_user_gives():
    [play] = yaml.safe_load((AWX / "configure.yml").read_text())
    set_by_the_play = set(play["vars"])
    used = jinja_names({k: v for k, v in CONFIG.items() if k != "controller_credential_types"})
    assert used <= set_by_the_play | GIVEN_BY_THE_USER
    assert "kubegpu_awx_kubeconfig" in used
    assert [t["ansible.builtin.include_role"]["name"] for t in play["tasks"]] == ["infra.aap_configuration.dispatch"]


# --- the credential type ------------------------------------------------------------------------


def injectors_sent(kind: dict[str, Any]) -> dict[str, Any]:
    """The injectors as controller_credential_types sends them to the controller: "{  {" made "{{" (the role's
    regex_replace; its README's "Formating Injectors")."""
    return json.loads(json.dumps(kind["injectors"]).replace("{  {", "{{"))


def test_the_injectors_are_left_alone_when_ansible_loads_the_configuration():
    """A "{{" in the variables would be templated by Ansible before the role runs, and fail on AWX's own names."""
    for kind in CONFIG["controller_credential_types"]:
        assert "{{" not in json.dumps(kind["injectors"]), kind["name"]


def test_the_credential_type_writes_the_kubeconfig_to_a_file_named_by_the_variable_the_modules_read():
    [kind] = CONFIG["controller_credential_types"]
    assert kind["name"] == "kubegpu kubeconfig"
    fields = {f["id"]: f for f in kind["inputs"]["fields"]}
    assert fields["kubeconfig"]["secret"] is True and fields["kubeconfig"]["multiline"] is True
    assert kind["inputs"]["required"] == ["kubeconfig"]
    injectors = injectors_sent(kind)
    files = {key.split(".", 1)[1]: template for key, template in injectors["file"].items()}
    assert files == {"kubeconfig": "{{ kubeconfig }}"}
    assert injectors["env"] == {"K8S_AUTH_KUBECONFIG": "{{ tower.filename.kubeconfig }}"}
    assert "K8S_AUTH_KUBECONFIG" in AUTH_ENV_VARS["kubeconfig"]


def test_the_credential_types_injectors_reference_only_its_own_inputs_and_files():
    for kind in CONFIG["controller_credential_types"]:
        inputs = {f["id"] for f in kind["inputs"]["fields"]}
        injectors = injectors_sent(kind)
        files = {key.split(".", 1)[1] for key in injectors.get("file", {})}
        assert all(key.startswith("template.") for key in injectors.get("file", {}))
        assert jinja_names(injectors) <= inputs | {"tower"}
        named_files = set()
        for text in (*injectors.get("env", {}).values(), *injectors.get("extra_vars", {}).values()):
            named_files |= set(re.findall(r"tower\.filename\.(\w+)", text))
        assert named_files <= files


def test_the_credential_is_of_that_type_and_serves_the_templates_and_the_inventory_source():
    [credential] = CONFIG["controller_credentials"]
    assert credential["credential_type"] == "kubegpu kubeconfig"
    assert set(credential["inputs"]) == {"kubeconfig"}
    assert all(credential["name"] in t["credentials"] for t in TEMPLATES.values())
    [source] = CONFIG["controller_inventory_sources"]
    assert source["credential"] == credential["name"]
    plugin_config = yaml.safe_load((REPO / source["source_path"]).read_text())
    assert plugin_config["plugin"] == "kubegpu.scheduling.gpu_nodes"
    assert source["source_path"].endswith(".kubegpu.yml"), "the gpu_nodes plugin reads only *.kubegpu.yml files"


# --- the job templates and their surveys ----------------------------------------------------------


def playbook_variables(playbook: str) -> set[str]:
    """What a playbook accepts: the options of its roles' argument specs and the variables its plays name."""
    plays = yaml.safe_load((REPO / playbook).read_text())
    accepted = jinja_names(plays)
    for play in plays:
        for entry in play.get("roles", []):
            role = (entry["role"] if isinstance(entry, dict) else entry).rsplit(".", 1)[-1]
            specs = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())
            accepted |= set(specs["argument_specs"]["main"]["options"])
    return accepted


def survey(template: dict[str, Any]) -> list[dict[str, Any]]:
    return template["survey_spec"]["spec"] if template.get("survey_enabled") else []


def survey_answers(questions: list[dict[str, Any]]) -> dict[str, Any]:
    """The extra variables AWX passes: each question's default, or the operator's answer where it has none."""
    answers = {}
    for question in questions:
        default = question.get("default")
        if default not in (None, ""):
            answers[question["variable"]] = default
        elif question["required"]:
            answers[question["variable"]] = ANSWERS[question["variable"]]
    return answers


def test_a_template_for_each_runbook_that_acts_and_the_read_only_ones():
    assert {name: t["playbook"] for name, t in TEMPLATES.items()} == ACTING | READ_ONLY
    for template in TEMPLATES.values():
        assert (REPO / template["playbook"]).is_file(), template["playbook"]
        assert template["project"] == CONFIG["controller_projects"][0]["name"]
        assert template["inventory"] == "kubegpu clusters"


@pytest.mark.parametrize("name", sorted(ACTING))
def test_an_acting_template_is_a_dry_run_unless_launched_as_run(name: str):
    template = TEMPLATES[name]
    assert template["job_type"] == "check" and template["ask_job_type_on_launch"] is True
    assert template["diff_mode"] is True
    assert template["allow_simultaneous"] is False


@pytest.mark.parametrize("name", sorted(READ_ONLY))
def test_a_read_only_template_runs(name: str):
    assert TEMPLATES[name]["job_type"] == "run"


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_each_survey_variable_is_one_the_playbook_accepts(name: str):
    template = TEMPLATES[name]
    variables = [q["variable"] for q in survey(template)]
    assert variables and len(variables) == len(set(variables))
    assert set(variables) <= playbook_variables(template["playbook"])


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_the_survey_defaults_pass_the_argument_spec_of_the_playbooks_role(name: str):
    template = TEMPLATES[name]
    plays = yaml.safe_load((REPO / template["playbook"]).read_text())
    roles = [entry["role"].rsplit(".", 1)[-1] for play in plays for entry in play.get("roles", [])]
    answers = survey_answers(survey(template))
    for role in roles:
        options = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())
        spec = options["argument_specs"]["main"]["options"]
        assert validate(spec, {k: v for k, v in answers.items() if k in spec}) == []


def test_the_surveys_ask_the_nodes_the_reason_and_the_breakers_share():
    asked = {name: {q["variable"]: q for q in survey(t)} for name, t in TEMPLATES.items()}
    assert {"node_quarantine_nodes", "node_quarantine_reason", "node_quarantine_max_share"} <= set(
        asked["kubegpu GPU node quarantine"]
    )
    assert "node_release_nodes" in asked["kubegpu GPU node release"]
    assert {"device_quarantine_devices", "device_quarantine_max_share"} <= set(asked["kubegpu GPU device quarantine"])
    for questions in asked.values():
        for variable, question in questions.items():
            if variable.endswith("_max_share"):
                assert (question["type"], question["min"], question["max"], question["default"]) == ("float", 0, 1, 0.5)
            if question["type"] == "multiplechoice":
                assert question["default"] in question["choices"]


def test_the_survey_text_of_a_device_list_reads_as_the_roles_devices():
    """A text answer reaches the role as a string; the argument spec (and the module) read it as the list."""
    spec = yaml.safe_load((REPO / "roles" / "device_quarantine" / "meta" / "argument_specs.yml").read_text())
    options = spec["argument_specs"]["main"]["options"]
    answer = "driver=gpu.nvidia.com pool=a device=gpu-3,driver=gpu.nvidia.com pool=b device=gpu-0"
    result = ArgumentSpecValidator(options).validate(
        {"device_quarantine_devices": answer, "device_quarantine_reason": "x"}, validate_role_argument_spec=True
    )
    assert result.error_messages == []
    assert result.validated_parameters["device_quarantine_devices"] == [
        {"driver": "gpu.nvidia.com", "pool": "a", "device": "gpu-3"},
        {"driver": "gpu.nvidia.com", "pool": "b", "device": "gpu-0"},
    ]


def test_the_rulebooks_templates_keep_their_names():
    assert {"kubegpu GPU node quarantine", "kubegpu GPU node release"} <= set(TEMPLATES)


def run_job_template_actions() -> list[dict[str, Any]]:
    """The run_job_template actions of the collection's rulebooks (extensions/eda/rulebooks/)."""
    found = []
    for path in sorted((REPO / "extensions" / "eda" / "rulebooks").glob("*.yml")):
        for ruleset in yaml.safe_load(path.read_text()):
            for rule in ruleset.get("rules", []):
                actions = rule.get("actions") or [rule.get("action", {})]
                found += [a["run_job_template"] for a in actions if "run_job_template" in a]
    return found


def test_what_a_rulebook_launches_is_a_template_here_that_accepts_what_it_passes():
    actions = run_job_template_actions()
    assert {a["name"] for a in actions} == {"kubegpu GPU node quarantine", "kubegpu GPU node release"}
    for action in actions:
        template = TEMPLATES[action["name"]]
        job_args = action.get("job_args", {})
        passed = set(job_args.get("extra_vars", {}))
        asked = {q["variable"] for q in survey(template)}
        assert passed <= asked or template.get("ask_variables_on_launch") is True, action["name"]
        assert passed <= playbook_variables(template["playbook"]), action["name"]
        if "job_type" in job_args:
            assert template.get("ask_job_type_on_launch") is True, action["name"]


# --- the workflow -------------------------------------------------------------------------------


def workflow() -> dict[str, Any]:
    [found] = CONFIG["controller_workflows"]
    return found


def paths_from_the_roots(nodes: dict[str, dict[str, Any]]) -> Iterator[list[str]]:
    children = {
        k: [c for key in ("success_nodes", "failure_nodes", "always_nodes") for c in n.get(key, [])]
        for k, n in nodes.items()
    }
    roots = set(nodes) - {c for cs in children.values() for c in cs}
    assert roots, "the workflow has a cycle"

    def walk(path: list[str]) -> Iterator[list[str]]:
        yield path
        for child in children[path[-1]]:
            assert child in nodes and child not in path, f"{path[-1]} -> {child}"
            yield from walk([*path, child])

    for root in sorted(roots):
        yield from walk([root])


def test_the_workflow_reports_plans_and_asks_approval_before_every_node_that_acts():
    nodes = {n["identifier"]: n for n in workflow()["simplified_workflow_nodes"]}
    acts = {k for k, n in nodes.items() if n.get("unified_job_template") in ACTING and n.get("job_type") != "check"}
    assert acts == {"quarantine", "release"}
    for path in paths_from_the_roots(nodes):
        for position, identifier in enumerate(path):
            if identifier in acts:
                assert any("approval_node" in nodes[k] for k in path[:position]), path
    order = max(paths_from_the_roots(nodes), key=len)
    kinds = [nodes[k].get("unified_job_template") or "approval" for k in order]
    assert kinds == [
        "kubegpu GPU fleet report",
        "kubegpu GPU node quarantine",
        "approval",
        "kubegpu GPU node quarantine",
        "approval",
        "kubegpu GPU node release",
    ]
    assert nodes["quarantine-plan"]["job_type"] == "check"


def test_the_workflow_nodes_prompt_only_what_their_templates_ask_on_launch():
    for node in workflow()["simplified_workflow_nodes"]:
        if "approval_node" in node:
            assert node["approval_node"]["name"] and node["approval_node"]["timeout"] > 0
            continue
        template = TEMPLATES[node["unified_job_template"]]
        if "job_type" in node:
            assert template.get("ask_job_type_on_launch") is True, node["identifier"]


def test_each_workflow_survey_variable_is_one_a_playbook_of_the_workflow_accepts():
    playbooks = {
        TEMPLATES[n["unified_job_template"]]["playbook"]
        for n in workflow()["simplified_workflow_nodes"]
        if "unified_job_template" in n
    }
    accepted = set().union(*(playbook_variables(p) for p in playbooks))
    variables = {q["variable"] for q in survey(workflow())}
    assert variables <= accepted
    # What the acting templates require without a default is asked once, for the whole workflow.
    for name in ("kubegpu GPU node quarantine", "kubegpu GPU node release"):
        required = {q["variable"] for q in survey(TEMPLATES[name]) if q["required"] and q.get("default") in (None, "")}
        assert required <= variables, name
