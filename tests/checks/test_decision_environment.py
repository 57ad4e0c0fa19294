"""The decision environment (decision-environment.yml): what ansible-builder makes of it, checked as the execution
environment is (tests/checks/test_packaging.py), and that it holds what rulebook activations need."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.checks.test_packaging import BIN, REPO, TARBALL, copy_of_the_tree, run

DEFINITION = yaml.safe_load((REPO / "decision-environment.yml").read_text())
EXECUTION = yaml.safe_load((REPO / "execution-environment.yml").read_text())


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the tree with the collection's tarball built in it, as the definition's comment says."""
    copied = copy_of_the_tree(tmp_path_factory.mktemp("tree"))
    build = run(str(BIN / "ansible-galaxy"), "collection", "build", ".", cwd=copied)
    assert build.returncode == 0, build.stdout + build.stderr
    return copied


def test_the_definition_holds_ansible_rulebook_java_17_and_the_collection():
    assert DEFINITION["version"] == 3
    dependencies = DEFINITION["dependencies"]
    assert "ansible-rulebook" in dependencies["python"]
    assert "java-17-openjdk-headless [platform:rpm]" in dependencies["system"]
    [collection] = dependencies["galaxy"]["collections"]
    assert Path(collection["name"]).name == TARBALL, "decision-environment.yml names the tarball of galaxy.yml"
    assert [Path(f["src"]).name for f in DEFINITION["additional_build_files"]] == [TARBALL]
    assert DEFINITION["options"]["tags"] == [
        f"kubegpu-scheduling-de:{TARBALL.rsplit('-', 1)[1].removesuffix('.tar.gz')}"
    ]


def test_the_decision_environment_runs_the_python_and_ansible_core_of_the_execution_environment():
    """One Python and one ansible-core for the collection, whether a job or a rulebook activation runs it."""
    for key in ("python_interpreter", "ansible_core", "ansible_runner"):
        assert DEFINITION["dependencies"][key] == EXECUTION["dependencies"][key], key


def test_java_17_is_named_for_rpm_and_dpkg_base_images():
    from bindep.depends import Depends

    depends = Depends("\n".join(DEFINITION["dependencies"]["system"]) + "\n")
    for platform, package in (("rpm", "java-17-openjdk-headless"), ("dpkg", "openjdk-17-jre-headless")):
        assert [rule[0] for rule in depends.active_rules([f"platform:{platform}"])] == [package], platform


def test_ansible_builder_creates_the_decision_environment_context(tree: Path):
    created = run(
        str(BIN / "ansible-builder"),
        "create",
        "--file",
        "decision-environment.yml",
        "--context",
        "context-de",
        cwd=tree,
    )
    assert created.returncode == 0, created.stdout + created.stderr
    context = tree / "context-de"
    [containerfile] = [p for p in (context / "Containerfile", context / "Dockerfile") if p.is_file()]
    text = containerfile.read_text()
    assert "ansible-galaxy collection install" in text and "introspect" in text
    assert DEFINITION["images"]["base_image"]["name"] in text
    [collection] = DEFINITION["dependencies"]["galaxy"]["collections"]
    assert yaml.safe_load((context / "_build" / "requirements.yml").read_text()) == {"collections": [collection]}
    assert "ansible-rulebook" in (context / "_build" / "requirements.txt").read_text().split()
    assert "java-17-openjdk-headless" in (context / "_build" / "bindep.txt").read_text()
    copied = context / "_build" / "collections" / TARBALL
    assert copied.read_bytes() == (tree / TARBALL).read_bytes()
