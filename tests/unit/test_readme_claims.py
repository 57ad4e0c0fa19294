"""What README.md, CONTRIBUTING.md and the pages under docs/ say that can be held without a cluster: the
README's index of runbooks, the runbooks' connection variables, the Security page's reads and writes
against the code and rbac/, the make targets, the local cluster's settings, the files and links the docs
name. Each claim is checked on the page that holds it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ansible_collections.kubegpu.scheduling.plugins.module_utils.admission.policy import (
    MUTATING_POLICY_NAME,
    VALIDATING_POLICY_NAMES,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.live_objects import (
    LIVE_CLAIM_KINDS,
    LIVE_WORKLOAD_PATHS,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.workload_kinds import WORKLOAD_KINDS
from tests.docs_pages import all_pages, guide_pages, headings, page, section

REPO = Path(__file__).resolve().parents[2]
README = page("README.md")
RUNBOOKS = page("docs/runbooks.md")
PLAYBOOKS = sorted((REPO / "playbooks").glob("*.yml"))
K8S_GROUP = "group/kubegpu.scheduling.k8s"
# The connection options every runbook passes on from a `kubegpu_<option>` variable.
CONNECTION_VARIABLES = ("kubeconfig", "context", "host", "api_key", "ca_cert", "client_cert", "client_key")
CONNECTION_VARIABLES += ("validate_certs",)


def run(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False)


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


def test_the_runbooks_page_names_every_connection_variable_of_the_runbooks():
    runbooks = words(section(RUNBOOKS, "Runbooks"))
    for option in CONNECTION_VARIABLES:
        assert f"kubegpu_{option}" in runbooks, option


# --- Security: what the collection reads and writes ---------------------------------------------

SECURITY = words(section(page("docs/security.md"), "What the collection reads and writes"))
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
    for name in (*VALIDATING_POLICY_NAMES, MUTATING_POLICY_NAME):
        assert name in SECURITY, name
    writer = yaml.safe_load((REPO / "rbac" / "kubegpu-writer.yaml").read_text())
    admission = [i for i in writer["items"] if i["metadata"]["name"] == "kubegpu-admission-policy"]
    granted = {r for item in admission for rule in item["rules"] for r in rule.get("resourceNames", [])}
    assert granted == {*VALIDATING_POLICY_NAMES, MUTATING_POLICY_NAME}


# --- commands, settings and files the README names ----------------------------------------------


def makefile_targets() -> set[str]:
    text = (REPO / "Makefile").read_text()
    return {m.group(1) for m in re.finditer(r"^([a-z][\w-]*(?:\.\d+)*):", text, re.M)}


def test_every_make_target_the_docs_name_exists():
    docs = "\n".join(all_pages().values())
    # `make x` as a command: at the start of a line or a code span, after `&&`, or after VAR=value.
    named = set(re.findall(r"(?:^|`|&& |\S=\S+ )make ([a-z][\w-]*(?:\.\d+)*)", docs, re.M))
    assert {
        "site",
        "test",
        "unit",
        "integration",
        "cluster-up",
        "cluster-down",
        "bench",
        "test-k8s-1.34",
        "docs",
    } <= named
    assert sorted(named - makefile_targets()) == []


def readme_paths() -> set[str]:
    """The repository paths README.md, CONTRIBUTING.md and the pages under docs/ name in backticks (no
    placeholders)."""
    docs = "\n".join(all_pages().values())
    tops = "plugins|roles|playbooks|rbac|docs|tests|scripts|changelogs|meta|extensions|bench|\\.ci"
    found = set()
    for token in re.findall(r"`([^`\s]+)`", docs):
        token = token.rstrip("/").split("::")[0]
        in_tree = re.match(rf"^({tops})/", token) and not re.search(r"[<>*…]|\.\.\.", token)
        if in_tree or re.fullmatch(r"[A-Za-z-]+\.(md|yml|yaml|txt|rst)", token):
            found.add(token)
    return found


def test_every_file_the_readme_and_contributing_name_exists():
    names = readme_paths()
    assert "tests/cluster/versions.py" in names and "rbac/kubegpu-reader.yaml" in names
    ignored = {"clusters.yml", "gpu.kubegpu.yml", "local.kubegpu.yml", "report.json", "report.sarif", "report.xml"}
    ignored |= {".pre-commit-config.yaml", "dp-config.yaml", "configmap.yaml", "gpu-operator-values.yaml"}
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    basenames = {Path(name).name for name in tracked.splitlines()}
    missing = sorted(n for n in names - ignored if not (REPO / n).exists() and ("/" in n or n not in basenames))
    assert missing == []


SETTINGS = section(page("docs/local-cluster.md"), "The local GPU cluster")


def settings_rows() -> dict[str, str]:
    """Variable to default, from the settings table (a row may give several variables and defaults)."""
    rows = {}
    for line in SETTINGS.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`KUBEGPU_"):
            names = re.findall(r"`(\w+)`", cells[0])
            defaults = re.findall(r"`([^`]+)`", cells[1]) or [""] * len(names)
            rows.update(zip(names, defaults, strict=False))
    return rows


def test_every_local_cluster_setting_is_read_with_the_default_the_readme_gives():
    rows = settings_rows()
    assert len(rows) == 11, sorted(rows)
    source = "".join(p.read_text() for p in (REPO / "tests" / "cluster").glob("*.py"))
    for name in rows:
        assert f'"{name}"' in source or f"{name.replace('SECOND_', '')}" in source, name
    probe = (
        "from tests.cluster import cluster, instance;"
        "print(cluster.ETCD_PORT, cluster.APISERVER_PORT, cluster.KWOK_PORT);"
        "print(*instance.SECOND_PORTS.values())"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBEGPU_")}
    done = run([sys.executable, "-c", probe], env)
    assert done.returncode == 0, done.stderr
    first, second = (line.split() for line in done.stdout.splitlines())
    names = ("ETCD", "APISERVER", "KWOK")
    assert first == [rows[f"KUBEGPU_{n}_PORT"] for n in names]
    assert second == [rows[f"KUBEGPU_SECOND_{n}_PORT"] for n in names]
    assert rows["KUBEGPU_CLUSTER_DIR"] == "~/.cache/kubegpu/cluster"
    assert rows["KUBEGPU_FLEET"] == "tests/cluster/fleet.yaml"
    from tests.cluster import versions

    assert rows["KUBEGPU_KUBERNETES"] == versions.NEWEST_KUBERNETES


def test_the_versions_the_readme_gives_are_the_pinned_ones():
    from tests.cluster import build, versions

    go = ".".join(map(str, build.required_go()[:2]))
    prerequisites = words(section(README, "Prerequisites"))
    assert f"Go {go} or newer" in prerequisites
    runtime = yaml.safe_load((REPO / "meta" / "runtime.yml").read_text())
    assert runtime["requires_ansible"] == ">=2.18.0" and "ansible-core 2.18 or newer" in prerequisites
    assert f"~/.cache/kubegpu/{versions.bin_dir().name}/kubectl" in SETTINGS or versions.bin_dir().name in SETTINGS
    assert "ansible-core==2.19.*" in (REPO / "test-requirements.txt").read_text()


def test_the_pre_commit_snippet_names_the_hook_and_options_it_has():
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    ci = page("docs/ci-validation.md")
    [snippet] = [b for b in re.findall(r"```yaml\n(.*?)```", ci, re.S) if "pre-commit-config" in b]
    config = yaml.safe_load(snippet)
    [repo] = config["repos"]
    assert repo["rev"] and repo["repo"] == yaml.safe_load((REPO / "galaxy.yml").read_text())["repository"]
    assert [h["id"] for h in repo["hooks"]] == [hooks[0]["id"]]
    cli = (REPO / "plugins" / "module_utils" / "validate" / "cli.py").read_text()
    assert all(f'"{a}"' in cli for a in repo["hooks"][0]["args"] if a.startswith("--"))


FIXTURES = REPO / "tests" / "unit" / "fixtures"


def script(name: str, *args: str) -> int:
    return run([sys.executable, str(REPO / "scripts" / name), *args]).returncode


def test_the_exit_statuses_of_the_commands_are_the_readme_table(tmp_path: Path):
    table = words(section(page("docs/ci-validation.md"), "Validating manifests in CI and pre-commit"))
    assert "| `gpu-pod-validate` | nothing fails the run |" in table
    good, bad = FIXTURES / "manifests" / "good", FIXTURES / "manifests" / "bad"
    assert script("gpu-pod-validate", str(good)) == 0
    assert script("gpu-pod-validate", str(bad)) == 1
    assert script("gpu-pod-validate", str(tmp_path / "missing.yaml")) == 1
    assert script("gpu-pod-validate", "--fail-on", "never", str(tmp_path / "missing.yaml")) == 0
    assert script("gpu-pod-validate", "--bogus") == 2
    (tmp_path / "a-file").write_text("")
    assert script("gpu-pod-validate", "--json", str(tmp_path / "a-file" / "r.json"), str(good)) == 2
    plugin_bad = sorted((FIXTURES / "plugin_config" / "bad").glob("*.yaml"))[0]
    assert script("gpu-plugin-config-validate", str(plugin_bad)) == 1
    assert script("gpu-plugin-config-validate", str(tmp_path / "missing.yaml")) == 2
    assert script("gpu-placement", "--kubeconfig", str(tmp_path / "missing")) == 2
    assert script("gpu-placement", "--bogus") == 2


def test_admission_policy_docs_name_the_custom_resource_kinds_the_policies_match():
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.admission.cel import admission_workload_kinds
    from ansible_collections.kubegpu.scheduling.plugins.modules import gpu_admission_policy

    description = words(" ".join(yaml.safe_load(gpu_admission_policy.DOCUMENTATION)["description"]))
    matched, unmatched = description.split("Not matched", 1)
    readme = words(section(RUNBOOKS, "Admission policies: `playbooks/admission_policy.yml`"))
    for kind in WORKLOAD_KINDS:
        admitted = kind in admission_workload_kinds()
        assert f"C({kind.group})" in (matched if admitted else unmatched), kind.group
        assert re.search(rf"\b{kind.kind}\b", matched if admitted else unmatched), kind.kind
        assert re.search(rf"\b{kind.kind}\b", readme), kind.kind


def test_the_modules_with_diff_mode_are_those_the_readme_names():
    import importlib

    modules = sorted(p.stem for p in (REPO / "plugins" / "modules").glob("gpu_*.py"))
    with_diff = set()
    for name in modules:
        module = importlib.import_module(f"ansible_collections.kubegpu.scheduling.plugins.modules.{name}")
        doc = yaml.safe_load(module.DOCUMENTATION)
        diff = (doc.get("attributes") or {}).get("diff_mode", {}).get("support")
        if diff == "full" or "diff mode" in " ".join(doc.get("notes") or []):
            with_diff.add(name)
    paragraph = words(section(page("docs/modules.md"), "Modules"))
    assert (
        "(`gpu_node_label`, `gpu_node_quarantine`, `gpu_device_quarantine`, `gpu_node_release`, `gpu_pod`, "
        "`gpu_admission_policy`, `gpu_device_plugin`, `gpu_alert_rules`, `gpu_driver_upgrade`) and `gpu_fleet_report` "
        "support diff mode" in paragraph
    )
    assert with_diff == {
        "gpu_node_label",
        "gpu_node_quarantine",
        "gpu_device_quarantine",
        "gpu_node_release",
        "gpu_pod",
        "gpu_admission_policy",
        "gpu_device_plugin",
        "gpu_alert_rules",
        "gpu_driver_upgrade",
        "gpu_fleet_report",
    }


def test_every_role_variable_the_docs_name_is_in_its_argument_spec():
    roles = sorted(p.name for p in (REPO / "roles").iterdir() if (p / "meta" / "argument_specs.yml").is_file())
    docs = "\n".join(guide_pages().values())
    # A role's name may begin with another's (device_plugin, device_plugin_check): the longest is the variable's.
    named = set(re.findall(rf"`((?:{'|'.join(roles)})_[a-z_]+)", docs)) - set(roles)
    assert len(named) > 15
    for variable in sorted(named):
        role = max((r for r in roles if variable.startswith(f"{r}_")), key=len)
        spec = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())
        assert variable in spec["argument_specs"]["main"]["options"], variable


# Options of other commands the docs give: ansible-playbook and ansible-inventory, docker, kubectl, apt-get,
# systemctl, and the local cluster's `python -m tests.cluster up`.
OTHER_COMMANDS_OPTIONS = {"--check", "--diff", "--forks", "--graph", "--list", "--gpus", "--timeout"}
OTHER_COMMANDS_OPTIONS |= {"--ignore-not-found", "--all", "--no-install-recommends", "--clusterrole", "--role"}
OTHER_COMMANDS_OPTIONS |= {"--serviceaccount", "--runtime-config", "--plugin-docs"}  # kube-apiserver, antsibull-docs
OTHER_COMMANDS_OPTIONS |= {"--now"}


def test_every_command_line_option_the_readme_gives_exists():
    known = set(OTHER_COMMANDS_OPTIONS)
    for name in ("gpu-pod-validate", "gpu-placement", "gpu-plugin-config-validate"):
        done = run([sys.executable, str(REPO / "scripts" / name), "--help"])
        known |= set(re.findall(r"--[a-z][a-z-]*", done.stdout))
    docs = "\n".join(guide_pages().values())
    spans = re.findall(r"`[^`\n]+`", docs) + re.findall(r"```sh\n(.*?)```", docs, re.S)
    given = {option for span in spans for option in re.findall(r"(?<![\w-])--[a-z][a-z-]*", span)}
    assert {"--sarif", "--toleration", "--release", "--jobs"} <= given
    assert sorted(given - known) == []


def test_site_runs_every_role_but_admission_policy_and_device_plugin_in_the_order_the_readme_gives():
    site = yaml.safe_load((REPO / "playbooks" / "site.yml").read_text())
    included = [
        t["ansible.builtin.include_role"]["name"].split(".")[-1]
        for play in site
        for t in play.get("tasks", [])
        if "ansible.builtin.include_role" in t
    ]
    roles = {p.name for p in (REPO / "roles").iterdir() if (p / "tasks").is_dir()}
    # admission_policy acts on every pod of the cluster, device_plugin provisions the plugin, node_quarantine,
    # device_quarantine and node_release act on the nodes and devices a person names, alert_rules writes to the
    # cluster's monitoring (the Prometheus Operator's PrometheusRule): each runs alone.
    alone = {
        "admission_policy",
        "device_plugin",
        "node_quarantine",
        "device_quarantine",
        "node_release",
        "alert_rules",
        "driver_upgrade",
    }
    assert set(included) == roles - alone
    assert " → ".join(included) in section(RUNBOOKS, "Site: `playbooks/site.yml`")
    for playbook in PLAYBOOKS:
        assert f"playbooks/{playbook.name}" in RUNBOOKS, playbook.name


def test_the_messages_troubleshooting_quotes_are_the_ones_the_tools_print():
    from tests.cluster import build
    from tests.cluster import cluster as local_cluster

    printed = [
        build.go_problem(None, build.required_go()),
        build.go_problem("go version go1.19.8 linux/amd64", build.required_go()),
        local_cluster.ports_message([("KUBEGPU_APISERVER_PORT", 36443)]),
        "go build of kube-apiserver failed (exit 1)",
        "timed out after 180s waiting for the fleet; logs in /root/.cache/kubegpu/cluster/logs",
    ]
    sources = {
        "go build of {name} failed": REPO / "tests" / "cluster" / "build.py",
        "timed out after {timeout:.0f}s waiting for {what}; logs in {layout.logs}": REPO
        / "tests"
        / "cluster"
        / "cluster.py",
        "the tests left the cluster changed:": REPO / "tests" / "integration" / "conftest.py",
        "no headless browser": REPO / "tests" / "browser.py",
    }
    for text, path in sources.items():
        assert text in path.read_text(), (text, path)
    printed += list(sources)
    printed += ["dial tcp", "i/o timeout"]  # go's own words when it cannot download a module
    troubleshooting = section(page("docs/testing.md"), "Troubleshooting")
    spans = [words(q) for q in re.findall(r"`([^`]+)`", troubleshooting)]
    quoted = [q for q in spans if " " in q and not q.startswith(("make ", "env ", "python ", "go "))]
    assert len(quoted) >= 6, quoted
    for quote in quoted:
        fragments = [f.strip() for f in quote.replace("…", "\0").split("\0") if f.strip(" ;")]
        assert any(all(f in message for f in fragments) for message in printed), quote


# --- the README: short, an index of the runbooks first, links that lead somewhere ------------------

INDEX_HEADING = "I want to ... run ..."
# The tasks the README's index answers, each by the words its row begins with.
INDEX_TASKS = (
    "check a cluster",
    "label nodes",
    "check the device plugin",
    "deploy the device plugin",
    "take a failed GPU node out of service",
    "take one failed DRA device out of service",
    "release a repaired node",
    "find why a GPU pod is pending, or where a job fits",
    "validate manifests in CI",
    "enforce at admission",
    "report many clusters",
)


def index_rows() -> list[list[str]]:
    rows = [line.strip().strip("|").split(" | ") for line in section(README, INDEX_HEADING).splitlines()]
    return [[c.strip() for c in row] for row in rows if len(row) == 3 and not set(row[0]) <= {"-", " "}][1:]


def test_the_readme_is_short_and_its_index_is_in_the_first_screenful():
    lines = README.splitlines()
    assert len(lines) <= 300
    start = lines.index(f"## {INDEX_HEADING}")
    assert start < 20, "the index of runbooks must be in the README's first screenful"
    rows = index_rows()
    for task in INDEX_TASKS:
        assert any(row[0].startswith(task) for row in rows), task


def test_the_readme_index_runs_every_shipped_playbook_by_its_full_name():
    commands = " ".join(row[1] for row in index_rows())
    for playbook in PLAYBOOKS:
        assert re.search(rf"\bkubegpu\.scheduling\.{playbook.stem}\b", commands), playbook.name
    for tool in ("gpu-placement", "gpu-pod-validate", "gpu-plugin-config-validate"):
        assert f"scripts/{tool}" in commands, tool


def test_the_readme_holds_no_table_but_its_index():
    """The reference tables live in docs/ (and the generated pages): the README's only table is its index."""
    tables = [line for line in README.splitlines() if line.startswith("|")]
    index = [line for line in section(README, INDEX_HEADING).splitlines() if line.startswith("|")]
    assert tables == index


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


@pytest.mark.parametrize("name", sorted(all_pages()))
def test_every_relative_link_of_the_docs_leads_to_a_file_and_heading_that_exist(name: str):
    text = all_pages()[name]
    here = (REPO / name).parent
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+:", target):
            continue
        path, _hash, anchor = target.partition("#")
        linked = (here / path).resolve() if path else REPO / name
        assert linked.exists(), f"{name}: {target}"
        if anchor and linked.suffix == ".md":
            anchors = {github_anchor(title) for _level, title, _s, _e in headings(linked.read_text())}
            assert anchor in anchors, f"{name}: {target}"


# --- Security: who writes, and the verbs of the roles ----------------------------------------------

NUMBER_WORDS = {3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine"}


def role_modules(role: str) -> set[str]:
    """The collection's modules a role's tasks call."""
    tasks = "\n".join(p.read_text() for p in (REPO / "roles" / role / "tasks").glob("*.yml"))
    return set(re.findall(r"kubegpu\.scheduling\.(gpu_\w+):", tasks))


def writing_modules() -> set[str]:
    """The modules with diff mode that write to the cluster (the report writes files)."""
    from tests.unit.test_code_shape import WRITE_MODULES

    return set(WRITE_MODULES)


def test_the_security_page_names_every_role_that_writes_and_how_many():
    writes = SECURITY[SECURITY.index("Writes (API):") : SECURITY.index("Writes (files):")]
    roles = sorted(p.name for p in (REPO / "roles").iterdir() if (p / "tasks").is_dir())
    writers = {role: sorted(role_modules(role) & writing_modules()) for role in roles}
    writers = {role: modules for role, modules in writers.items() if modules}
    assert f"Writes (API): {NUMBER_WORDS[len(writers)]} roles write" in writes
    for role, modules in writers.items():
        assert any(f"`{role}` (`{module}`)" in writes for module in modules), role


def writer_roles() -> dict[str, set[str]]:
    """Role name to every verb it grants, for the roles of rbac/kubegpu-writer.yaml."""
    writer = yaml.safe_load((REPO / "rbac" / "kubegpu-writer.yaml").read_text())
    return {
        item["metadata"]["name"]: {verb for rule in item["rules"] for verb in rule["verbs"]}
        for item in writer["items"]
        if item["kind"] in ("ClusterRole", "Role")
    }


def test_the_rbac_table_names_every_verb_of_the_roles_it_describes():
    table = section(page("docs/security.md"), "The RBAC it needs")
    described = dict(re.findall(r"(?:Cluster)?Role `(kubegpu-[a-z-]+)` \(([^)]*)\)", table))
    assert {"kubegpu-admission-policy", "kubegpu-device-plugin", "kubegpu-node-quarantine"} <= set(described)
    for role, verbs in writer_roles().items():
        if role in described:
            for verb in verbs:
                assert re.search(rf"\b{verb}\b", described[role]), (role, verb)


@pytest.mark.parametrize(
    ("module", "role"),
    [
        ("gpu_admission_policy", "kubegpu-admission-policy"),
        ("gpu_device_plugin", "kubegpu-device-plugin"),
        ("gpu_alert_rules", "kubegpu-alert-rules"),
    ],
)
def test_the_rbac_notes_of_the_modules_name_every_verb_of_their_role(module: str, role: str):
    import importlib

    doc = yaml.safe_load(
        importlib.import_module(f"ansible_collections.kubegpu.scheduling.plugins.modules.{module}").DOCUMENTATION
    )
    notes = " ".join(doc["notes"])
    assert role in notes
    for verb in writer_roles()[role]:
        assert f"C({verb})" in notes, verb


def test_the_clean_up_page_names_the_marks_the_code_sets():
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_quarantine.device import (
        OWNER_LABEL,
        OWNER_LABEL_VALUE,
    )
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.ownership import (
        QUARANTINE_TAINT_EFFECT,
        QUARANTINE_TAINT_KEY,
        RECORD_ANNOTATION,
        Record,
    )

    clean_up = page("docs/clean-up.md")
    assert f"devicetaintrules -l {OWNER_LABEL}={OWNER_LABEL_VALUE}" in clean_up
    assert f"{QUARANTINE_TAINT_KEY}:{QUARANTINE_TAINT_EFFECT}-" in clean_up
    assert f'"{RECORD_ANNOTATION}"' in clean_up and f"{RECORD_ANNOTATION}-" in clean_up
    assert "cordoned" in Record.__dataclass_fields__
    for role in ("sample_workload", "admission_policy", "device_plugin"):
        assert f"kubegpu.scheduling.{role} -e {role}_state=absent" in clean_up, role


def test_the_fleet_setting_is_said_to_be_left_out_by_make_test_which_applies_its_own_fleet():
    row = next(line for line in SETTINGS.splitlines() if line.startswith("| `KUBEGPU_FLEET`"))
    assert "`make test` always takes `tests/cluster/fleet.yaml`" in row
    conftest = (REPO / "tests" / "integration" / "conftest.py").read_text()
    assert "KUBEGPU_FLEET" not in conftest and 'local_cluster.HERE / "fleet.yaml"' in conftest


def test_the_readme_gives_the_size_and_time_of_make_test_as_last_recorded():
    """The README's "about N tests, about M minutes" is the `make test` run recorded in docs/supported-versions.md."""
    said = re.search(r"`make test` \(about ([\d,]+) tests, about (\d+) minutes", words(README))
    assert said, "the README no longer says how many tests make test runs"
    row = next(line for line in page("docs/supported-versions.md").splitlines() if line.startswith("| `make test` |"))
    recorded = re.search(r"(\d+) passed", row)
    minutes = re.search(r"\| (\d+) min \d+ s \|", row)
    assert recorded and minutes, row
    assert abs(int(said[1].replace(",", "")) - int(recorded[1])) <= 0.05 * int(recorded[1])
    assert abs(int(said[2]) - int(minutes[1])) <= 3


@pytest.mark.parametrize("tool", ["gpu-placement", "gpu-pod-validate", "gpu-plugin-config-validate"])
def test_a_tool_started_from_the_checkout_runs_with_the_checkout_venv(tool: str):
    """As the README says: after `make venv`, `scripts/<tool>` runs with .venv's Python (which has the kubernetes
    client), whatever python3 is first on PATH."""
    if not (REPO / ".venv" / "bin" / "python").exists():
        pytest.skip("no .venv in this checkout")
    plain = {"PATH": "/usr/bin:/bin"}
    helped = run([str(REPO / "scripts" / tool), "--help"], plain)
    assert helped.returncode == 0 and f"usage: {tool}" in helped.stdout, helped.stderr
    assert "not found" not in helped.stderr, helped.stderr
    if tool == "gpu-placement":
        done = run([str(REPO / "scripts" / tool), "--kubeconfig", "/nonexistent/kubeconfig"], plain)
        assert done.returncode == 2 and "kubeconfig file not found" in done.stderr, done.stderr


def test_the_k8s_action_group_is_every_module_that_takes_the_connection_options():
    import importlib

    from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.config import AUTH_ARG_SPEC

    modules = sorted(p.stem for p in (REPO / "plugins" / "modules").glob("gpu_*.py"))
    connected = []
    for name in modules:
        module = importlib.import_module(f"ansible_collections.kubegpu.scheduling.plugins.modules.{name}")
        if set(AUTH_ARG_SPEC) <= set(module.argument_spec()):
            connected.append(name)
    assert sorted(k8s_modules()) == connected
    said = words(page("docs/real-cluster.md"))
    for name in sorted(set(modules) - set(connected)):
        assert f"`{name}`" in said.split("do not talk to it", maxsplit=1)[0].rsplit("action group", 1)[-1], name


def test_make_docs_writes_the_site_where_the_readme_says_and_git_ignores_it():
    from tests import docs_site

    assert "`build/docs/html/index.html`" in section(README, "Documentation")
    recipe = re.search(r"^docs:.*\n((?:\t.*\n)+)", (REPO / "Makefile").read_text(), re.M)
    assert recipe and "-m tests.docs_site --dest build/docs" in recipe[1]
    assert "/build/" in (REPO / ".gitignore").read_text().splitlines()
    assert 'html = dest / "html"' in Path(docs_site.__file__).read_text()


def test_the_modules_page_has_a_row_for_every_module():
    rows = [line for line in page("docs/modules.md").splitlines() if line.startswith("| `gpu_")]
    named = sorted(re.match(r"\| `(gpu_\w+)`", row)[1] for row in rows)
    assert named == sorted(p.stem for p in (REPO / "plugins" / "modules").glob("gpu_*.py"))
