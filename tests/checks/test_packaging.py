"""The collection as it is shipped: the tarball, the execution environment, the requirements, the changelog."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
GALAXY = yaml.safe_load((REPO / "galaxy.yml").read_text())
TARBALL = f"{GALAXY['namespace']}-{GALAXY['name']}-{GALAXY['version']}.tar.gz"

# Tracked top-level paths that only developers and CI need. Every other tracked top-level path
# is something users need, and must be in the tarball.
DEVELOPER_ONLY = {
    ".ansible-lint",
    ".ci",
    ".gitignore",
    ".pre-commit-hooks.yaml",
    ".yamllint",
    "Makefile",
    "bench",
    "decision-environment.yml",
    "execution-environment.yml",
    "extensions",
    "galaxy.yml",
    "pyproject.toml",
    "pytest.ini",
    "test-requirements.txt",
    "tests",
}
# Written by ansible-galaxy into every tarball.
GALAXY_METADATA = {"MANIFEST.json", "FILES.json"}
# Of the developer-only extensions/, what ansible-rulebook loads from an installed collection.
SHIPPED_EXTENSIONS = ("extensions/eda/plugins/", "extensions/eda/rulebooks/")


def run(*argv: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)


def tracked_files() -> list[str]:
    listing = run("git", "ls-files", "-co", "--exclude-standard", "-z", cwd=REPO).stdout
    return [name for name in listing.split("\0") if name and (REPO / name).is_file()]


def copy_of_the_tree(target: Path) -> Path:
    for name in tracked_files():
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, target / name)
    return target


def add_strays(tree: Path) -> None:
    """What a developer's tree holds besides the sources: virtual environments and outputs."""
    for venv in ("venv", ".venv-py312"):
        made = run(sys.executable, "-m", "venv", "--without-pip", str(tree / venv), cwd=tree)
        assert made.returncode == 0, made.stderr
        (tree / venv / "lib" / "stray.py").write_text("STRAY = True\n")
    for output in ("out/report.sarif", "reports/report.json", "tests/output/junit/sanity.xml", "dist/old.tar.gz"):
        (tree / output).parent.mkdir(parents=True, exist_ok=True)
        (tree / output).write_text("stray output\n")
    (tree / "plugins" / "modules" / "__pycache__").mkdir(exist_ok=True)
    (tree / "plugins" / "modules" / "__pycache__" / "gpu_pod.cpython-311.pyc").write_bytes(b"\0")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """The collection built from a copy of the tree that has stray virtual environments and outputs."""
    tree = copy_of_the_tree(tmp_path_factory.mktemp("tree"))
    add_strays(tree)
    build = run(str(BIN / "ansible-galaxy"), "collection", "build", ".", cwd=tree)
    assert build.returncode == 0, build.stdout + build.stderr
    with tarfile.open(tree / TARBALL) as archive:
        names = archive.getnames()
    return tree, names


def top_level(names: list[str]) -> set[str]:
    return {name.split("/", 1)[0] for name in names}


def test_the_tarball_holds_no_virtual_environment_or_output(built):
    _tree, names = built
    strays = [n for n in names if n.split("/", 1)[0] in ("venv", ".venv-py312", "out", "reports", "dist", "tests")]
    assert strays == []
    assert not [n for n in names if "__pycache__" in n or n.endswith((".pyc", ".tar.gz", "pyvenv.cfg"))]
    assert not [n for n in names if any(part.startswith(".") for part in n.split("/"))]


def test_the_tarball_holds_what_users_need_and_nothing_else(built):
    _tree, names = built
    shipped = top_level(tracked_files()) - DEVELOPER_ONLY
    assert top_level(names) - GALAXY_METADATA - {"extensions"} == shipped, (
        "a new top-level path: ship it (galaxy.yml, manifest) or list it in DEVELOPER_ONLY"
    )
    for needed in (
        "README.md",
        "LICENSE",
        # What README.md and the modules' docs point to.
        "CONTRIBUTING.md",
        "docs/fleet-report.schema.json",
        "docs/findings.md",
        "docs/benchmarks.md",
        "docs/supported-versions.md",
        "docs/runbooks.md",
        "docs/runbooks/gpu-failure.md",
        # The docs site's extra pages and links, as antsibull-docs reads them from an installed collection.
        "docs/docsite/extra-docs.yml",
        "docs/docsite/links.yml",
        "docs/docsite/rst/guides.rst",
        "CHANGELOG.rst",
        "requirements.txt",
        "bindep.txt",
        "meta/runtime.yml",
        "meta/execution-environment.yml",
        "changelogs/changelog.yaml",
        "plugins/modules/gpu_pod_validate.py",
        "plugins/module_utils/validate/junit.py",
        "plugins/filter/fleet_diagnosis.yml",
        "roles/preflight/meta/argument_specs.yml",
        "playbooks/site.yml",
        "rbac/kubegpu-reader.yaml",
        "scripts/gpu-pod-validate",
        "extensions/eda/plugins/event_source/gpu_health.py",
        "extensions/eda/rulebooks/gpu_health.yml",
    ):
        assert needed in names, needed
    tracked_user_files = {
        n for n in tracked_files() if n.split("/", 1)[0] in shipped or n.startswith(SHIPPED_EXTENSIONS)
    }
    left_out = sorted(n for n in tracked_user_files - set(names) if not n.startswith("changelogs/fragments/"))
    assert left_out == []


def test_the_script_stays_executable_in_the_tarball(built):
    tree, _names = built
    with tarfile.open(tree / TARBALL) as archive:
        assert archive.getmember("scripts/gpu-pod-validate").mode & 0o111


def test_ansible_builder_creates_the_execution_environment_context(built):
    tree, _names = built
    definition = yaml.safe_load((tree / "execution-environment.yml").read_text())
    assert definition["version"] == 3
    [collection] = definition["dependencies"]["galaxy"]["collections"]
    assert Path(collection["name"]).name == TARBALL, "execution-environment.yml names the tarball of galaxy.yml"
    assert [Path(f["src"]).name for f in definition["additional_build_files"]] == [TARBALL]

    created = run(str(BIN / "ansible-builder"), "create", "--file", "execution-environment.yml", cwd=tree)
    assert created.returncode == 0, created.stdout + created.stderr
    context = tree / "context"
    [containerfile] = [p for p in (context / "Containerfile", context / "Dockerfile") if p.is_file()]
    text = containerfile.read_text()
    assert "ansible-galaxy collection install" in text and "introspect" in text
    assert yaml.safe_load((context / "_build" / "requirements.yml").read_text()) == {"collections": [collection]}
    copied = context / "_build" / "collections" / TARBALL
    assert copied.read_bytes() == (tree / TARBALL).read_bytes()


def test_ansible_builder_reads_the_requirements_of_the_installed_collection(built, tmp_path):
    tree, _names = built
    install = run(
        str(BIN / "ansible-galaxy"),
        "collection",
        "install",
        "--force",
        str(tree / TARBALL),
        "-p",
        str(tmp_path),
        cwd=tmp_path,
    )
    assert install.returncode == 0, install.stderr
    introspected = run(
        str(BIN / "ansible-builder"),
        "introspect",
        str(tmp_path),
        "--write-pip",
        str(tmp_path / "pip.txt"),
        "--write-bindep",
        str(tmp_path / "bindep.txt"),
        cwd=tmp_path,
    )
    assert introspected.returncode == 0, introspected.stdout + introspected.stderr
    pip = (tmp_path / "pip.txt").read_text()
    assert f"kubernetes>={kubernetes_minimum()}  # from collection kubegpu.scheduling" in pip.splitlines()
    assert "openssh-clients [platform:rpm]" in (tmp_path / "bindep.txt").read_text()


def test_bindep_names_packages_for_rpm_and_dpkg_systems():
    from bindep.depends import Depends

    depends = Depends((REPO / "bindep.txt").read_text())
    for platform, package in (("rpm", "openssh-clients"), ("dpkg", "openssh-client")):
        wanted = depends.active_rules([f"platform:{platform}"])
        assert [rule[0] for rule in wanted] == [package], platform


def test_meta_execution_environment_points_at_the_requirement_files():
    meta = yaml.safe_load((REPO / "meta" / "execution-environment.yml").read_text())
    assert meta["dependencies"] == {"python": "requirements.txt", "system": "bindep.txt"}
    assert all((REPO / path).is_file() for path in meta["dependencies"].values())


def kubernetes_minimum() -> str:
    [line] = [line for line in (REPO / "requirements.txt").read_text().splitlines() if line.startswith("kubernetes")]
    return line.split(">=", 1)[1].strip()


# How the docs state the minimum: "kubernetes >= X" (module and fragment requirements) and
# "`kubernetes` (X or newer)" (docs/real-cluster.md).
MINIMUM_MENTIONS = (
    re.compile(r"kubernetes\s*>=\s*(\d+(?:\.\d+)+)"),
    re.compile(r"`kubernetes` \((\d+(?:\.\d+)+) or newer\)"),
)


def test_one_kubernetes_minimum_in_the_requirements_and_the_docs():
    minimum = kubernetes_minimum()
    documents = [REPO / "README.md", *sorted((REPO / "plugins").rglob("*.py")), *sorted((REPO / "docs").rglob("*.md"))]
    mentions = [
        (str(path.relative_to(REPO)), found)
        for path in documents
        for pattern in MINIMUM_MENTIONS
        for found in pattern.findall(path.read_text())
    ]
    assert {"docs/real-cluster.md", "plugins/doc_fragments/connection.py"} <= {path for path, _found in mentions}
    assert [m for m in mentions if m[1] != minimum] == []


def test_the_changelog_has_the_release_of_galaxy_yml_and_the_rst_is_generated_from_it(tmp_path):
    changelog = yaml.safe_load((REPO / "changelogs" / "changelog.yaml").read_text())
    release = changelog["releases"][GALAXY["version"]]
    assert release["changes"]["release_summary"]
    assert {m["name"] for m in release["modules"]} == {
        p.stem for p in (REPO / "plugins" / "modules").glob("*.py") if p.stem != "__init__"
    }
    tree = tmp_path / "ansible_collections" / GALAXY["namespace"] / GALAXY["name"]
    for name in ("galaxy.yml", "changelogs/config.yaml", "changelogs/changelog.yaml"):
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, tree / name)
    generated = run(str(BIN / "antsibull-changelog"), "generate", cwd=tree)
    assert generated.returncode == 0, generated.stdout + generated.stderr
    assert (tree / "CHANGELOG.rst").read_text() == (REPO / "CHANGELOG.rst").read_text(), (
        "CHANGELOG.rst is stale: run antsibull-changelog generate"
    )
