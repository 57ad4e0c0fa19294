"""`version_added` of every module, plugin and option is the release of changelogs/changelog.yaml that added it,
and no release later than the collection's version in galaxy.yml."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
GALAXY = yaml.safe_load((REPO / "galaxy.yml").read_text())
RELEASES = yaml.safe_load((REPO / "changelogs" / "changelog.yaml").read_text())["releases"]
MODULES = sorted(p.stem for p in (REPO / "plugins" / "modules").glob("gpu_*.py"))


def version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in str(text).split("."))


def documentation(module: str) -> dict:
    source = importlib.import_module(f"ansible_collections.kubegpu.scheduling.plugins.modules.{module}")
    return yaml.safe_load(source.DOCUMENTATION)


def added_in(options: dict, path: str = "") -> list[tuple[str, str]]:
    """(option path, version_added) of every option and suboption that says when it was added."""
    found = []
    for name, option in (options or {}).items():
        if "version_added" in option:
            found.append((f"{path}{name}", str(option["version_added"])))
        found += added_in(option.get("suboptions") or {}, f"{path}{name}.")
    return found


def release_of(module: str) -> str:
    [release] = [r for r, data in RELEASES.items() if module in {m["name"] for m in data.get("modules", [])}]
    return release


@pytest.mark.parametrize("module", MODULES)
def test_a_module_was_added_in_the_release_that_lists_it_and_no_option_after_the_collection(module: str):
    doc = documentation(module)
    assert str(doc["version_added"]) == release_of(module), module
    for option, added in added_in(doc.get("options") or {}):
        assert version(added) <= version(GALAXY["version"]), (module, option, added)
        assert added in RELEASES, (module, option, added)


def test_the_plugins_were_added_in_a_release_of_the_changelog():
    docs = [
        yaml.safe_load((REPO / "plugins" / "filter" / f"{name}.yml").read_text())["DOCUMENTATION"]
        for name in ("fleet_summary", "fleet_diagnosis")
    ]
    inventory = importlib.import_module("ansible_collections.kubegpu.scheduling.plugins.inventory.gpu_nodes")
    docs.append(yaml.safe_load(inventory.DOCUMENTATION))
    for doc in docs:
        assert str(doc["version_added"]) in RELEASES, doc["name"]
        assert version(doc["version_added"]) <= version(GALAXY["version"])
