"""The supported range is said in one place per reader and is the one tested: meta/runtime.yml's
requires_ansible, the roles' min_ansible_version and requirements.txt's kubernetes minimum equal the
oldest releases `make test-versions` installs (tests/versions/oldest.txt), and the README's table
names them and the newest."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def pins(name: str) -> dict[str, str]:
    """Package name to its pin (what follows the name) in tests/versions/<name>.txt."""
    found = {}
    for line in (REPO / "tests" / "versions" / f"{name}.txt").read_text().splitlines():
        match = re.match(r"^([A-Za-z][\w.-]*)\s*(.*)$", line.strip())
        if match and not line.startswith("-r"):
            found[match[1]] = match[2]
    return found


def oldest() -> tuple[str, str]:
    """(ansible-core minor, kubernetes version) of the oldest releases tested."""
    pinned = pins("oldest")
    core = re.fullmatch(r"==(\d+\.\d+)\.\*", pinned["ansible-core"])
    client = re.fullmatch(r"==(\d+\.\d+\.\d+)", pinned["kubernetes"])
    assert core and client, pinned
    return core[1], client[1]


def test_the_declared_minimums_are_the_oldest_releases_tested():
    core, client = oldest()
    runtime = yaml.safe_load((REPO / "meta" / "runtime.yml").read_text())
    assert runtime["requires_ansible"] == f">={core}.0"
    for meta in sorted((REPO / "roles").glob("*/meta/main.yml")):
        assert str(yaml.safe_load(meta.read_text())["galaxy_info"]["min_ansible_version"]) == core, meta
    requirements = (REPO / "requirements.txt").read_text()
    assert re.search(rf"^kubernetes>={re.escape(client)}$", requirements, re.MULTILINE), requirements


def supported_versions_table() -> str:
    """docs/supported-versions.md up to the runs behind its table."""
    page = (REPO / "docs" / "supported-versions.md").read_text()
    return page.split("\n## The runs behind the table", 1)[0]


def test_the_supported_versions_table_names_what_is_tested():
    core, client = oldest()
    newest = re.fullmatch(r"==(\d+\.\d+)\.\*", pins("newest")["ansible-core"])
    assert newest
    section = supported_versions_table()
    for version in (core, newest[1], client):
        assert version in section, version
    assert "make test-versions" in section


def test_each_kubernetes_release_the_local_cluster_builds_has_its_row_and_command():
    """tests/cluster/versions.py's releases are the README's Kubernetes rows: the newest tested by `make test`,
    each older one by its `make test-k8s-<minor>`, which runs against that release's cluster."""
    from tests.cluster import versions

    section = supported_versions_table()
    rows = [line for line in section.splitlines() if line.startswith("| Kubernetes |")]
    assert len(rows) == len(versions.KUBERNETES_RELEASES)
    makefile = (REPO / "Makefile").read_text()
    for release in versions.KUBERNETES_RELEASES:
        minor = ".".join(release.lstrip("v").split(".")[:2])
        command = "make test" if release == versions.NEWEST_KUBERNETES else f"make test-k8s-{minor}"
        [row] = [r for r in rows if f"({release}," in r]
        assert row.rstrip().endswith(f"| `{command}` |"), row
        if release != versions.NEWEST_KUBERNETES:
            target = re.search(rf"^test-k8s-{re.escape(minor)}:.*\n((?:\t.*\n)+)", makefile, re.M)
            assert target and f"KUBEGPU_KUBERNETES={minor}" in makefile and "-m every_release" in target[1]


def test_make_test_versions_runs_sanity_and_every_runbook_in_both_venvs():
    from tests.versions import smoke

    makefile = (REPO / "Makefile").read_text()
    recipe = re.search(r"^test-versions:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert recipe and "sanity-versions smoke-versions" in recipe[1], recipe
    assert re.search(r"^VERSION_VENVS = oldest newest$", makefile, re.M)
    smoked = {playbook for playbook, _options, _extra in smoke.runs(Path("report"), Path("inventory"), {})}
    assert smoked == {path.name for path in (REPO / "playbooks").glob("*.yml")}


def test_the_smoke_run_reaches_every_module_and_the_inventory_plugin():
    """Each module is called by a runbook's playbook or role, or run on its own by tests/versions/smoke.py."""
    from tests.versions import smoke

    runbooks = " ".join(p.read_text() for p in [*(REPO / "playbooks").glob("*.yml"), *(REPO / "roles").rglob("*.yml")])
    by_runbook = {m.stem for m in (REPO / "plugins" / "modules").glob("gpu_*.py") if f".{m.stem}:" in runbooks}
    on_their_own = {module for module, _options, _args in smoke.module_runs()}
    modules = {m.stem for m in (REPO / "plugins" / "modules").glob("*.py") if m.stem != "__init__"}
    assert by_runbook | on_their_own == modules
    assert not by_runbook & on_their_own, "run on its own although a runbook calls it"
    assert "kubegpu.scheduling.gpu_nodes" in (REPO / "tests" / "versions" / "smoke.py").read_text()
    # Every role is run by one of the playbooks the smoke run runs.
    playbooks = " ".join(p.read_text() for p in (REPO / "playbooks").glob("*.yml"))
    roles = {r.name for r in (REPO / "roles").iterdir() if (r / "tasks" / "main.yml").is_file()}
    assert {r for r in roles if f"kubegpu.scheduling.{r}\n" in playbooks} == roles
