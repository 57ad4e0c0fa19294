"""The checks the Ansible ecosystem expects of a collection, run as tests so CI runs them."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
MODULES = sorted(p.stem for p in (REPO / "plugins" / "modules").glob("*.py") if p.stem != "__init__")
FILTERS = sorted(p.stem for p in (REPO / "plugins" / "filter").glob("*.yml"))


def run(*argv: str, cwd: Path = REPO, env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def test_ansible_test_sanity_passes():
    result = run(sys.executable, "tests/sanity/run.py")
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert 'Running sanity test "validate-modules"' in result.stdout


def test_ansible_lint_production_profile_passes():
    result = run(str(BIN / "ansible-lint"), "--profile", "production", "--nocolor")
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert "Profile 'production' was required, and it passed" in result.stdout + result.stderr


def test_python_is_formatted_linted_and_typed():
    lint = run(str(BIN / "ruff"), "check", ".")
    assert lint.returncode == 0, lint.stdout[-4000:]
    formatting = run(str(BIN / "ruff"), "format", "--check", ".")
    assert formatting.returncode == 0, formatting.stdout[-4000:]
    types = run(str(BIN / "mypy"))
    assert types.returncode == 0, types.stdout[-4000:]


def test_changelog_fragments_lint():
    result = run(str(BIN / "antsibull-changelog"), "lint")
    assert result.returncode == 0, result.stdout + result.stderr
    assert list((REPO / "changelogs" / "fragments").glob("*.yml"))


def test_built_collection_installs_and_documents_every_module(tmp_path):
    build = run(str(BIN / "ansible-galaxy"), "collection", "build", str(REPO), "--output-path", str(tmp_path))
    assert build.returncode == 0, build.stderr
    tarball = next(tmp_path.glob("kubegpu-scheduling-*.tar.gz"))
    with tarfile.open(tarball) as archive:
        names = archive.getnames()
    assert "plugins/modules/gpu_node_facts.py" in names
    assert not [n for n in names if n.startswith((".venv", "tests/output", "bench/"))]

    collections = tmp_path / "collections"
    install = run(str(BIN / "ansible-galaxy"), "collection", "install", "--force", str(tarball), "-p", str(collections))
    assert install.returncode == 0, install.stderr
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections))
    for module in MODULES:
        doc = run(str(BIN / "ansible-doc"), "-t", "module", f"kubegpu.scheduling.{module}", env=env, cwd=tmp_path)
        assert doc.returncode == 0 and "EXAMPLES" in doc.stdout and "RETURN VALUES" in doc.stdout, doc.stderr
        assert str(collections) in doc.stdout
    assert FILTERS == ["fleet_diagnosis", "fleet_summary"]
    plain = dict(env, ANSIBLE_NOCOLOR="1")
    for name in FILTERS:
        doc = run(str(BIN / "ansible-doc"), "-t", "filter", f"kubegpu.scheduling.{name}", env=plain, cwd=tmp_path)
        assert doc.returncode == 0 and "RETURN VALUES" in doc.stdout, doc.stderr
        assert f"NAME: {name}" in doc.stdout and f"plugins/filter/{name}.yml" in doc.stdout, doc.stdout
