"""One option contract across the modules: an idea that several modules take has one name, type and
default, declared once in module_utils/options/groups.py and documented once in
plugins/doc_fragments/options.py. Each failure names the module and the option."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.config import AUTH_ARG_SPEC
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.options.groups import (
    ALIAS_REMOVAL,
    FRAGMENTS,
    GROUP_OF,
    GROUPS,
    check_ranges,
    module_options,
    range_problem,
)
from tests.documented_options import fragment_options

MODULES = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "plugins" / "modules").glob("gpu_*.py"))
# Names this collection used for a group's idea before the groups: a module may keep one only as a
# deprecated alias of the group's option.
RETIRED = {
    "resource_name": "resource_names",
    "gpu_resources": "resource_names",
    "resource": "resource_names",
    "label_selector": "label_selectors",
    "nodes": "names",
    "report_only": "fail_on",
}
# The option keys that make two options the same to a user.
COMPARED = ("type", "elements", "default", "choices")


def spec_of(module: str) -> dict:
    return importlib.import_module(f"ansible_collections.kubegpu.scheduling.plugins.modules.{module}").argument_spec()


def own_options(module: str) -> dict:
    return {name: option for name, option in spec_of(module).items() if name not in AUTH_ARG_SPEC}


def deprecated_names(option: dict) -> set[str]:
    return {alias["name"] for alias in option.get("deprecated_aliases", [])}


def drifts(module: str) -> list[str]:
    """How the module's options depart from the groups, as 'module: option: what'."""
    found = []
    for name, option in own_options(module).items():
        # A retired name may stay one release as an option of its own, deprecated until ALIAS_REMOVAL, where
        # its type keeps it from being an alias (report_only: true is fail_on: never).
        kept_deprecated = option.get("removed_in_version") == ALIAS_REMOVAL
        if name in RETIRED and not kept_deprecated:
            found.append(f"{module}: {name}: named as before the option groups; call it {RETIRED[name]}")
        if name in GROUP_OF:
            group = GROUPS[GROUP_OF[name]][name]
            for key in COMPARED:
                if option.get(key) != group.get(key):
                    found.append(
                        f"{module}: {name}: {key} {option.get(key)!r}, the group {GROUP_OF[name]} says {group.get(key)!r}"
                    )
        undeclared = set(option.get("aliases", [])) - deprecated_names(option)
        found += [f"{module}: {name}: alias {a} is not a deprecated alias" for a in sorted(undeclared & set(RETIRED))]
    return found


@pytest.mark.parametrize("module", MODULES)
def test_a_module_takes_each_shared_idea_as_its_group_declares_it(module):
    assert not drifts(module), "\n".join(drifts(module))


def test_an_option_name_means_one_type_across_modules():
    seen: dict[str, tuple[str, object]] = {}
    clashes = []
    for module in MODULES:
        for name, option in own_options(module).items():
            kind = (option.get("type", "str"), option.get("elements"))
            first = seen.setdefault(name, (module, kind))
            if first[1] != kind:
                clashes.append(f"{name}: {first[0]} takes {first[1]}, {module} takes {kind}")
    assert not clashes, "\n".join(clashes)


def test_the_doc_fragments_document_each_group_as_declared():
    for group, options in GROUPS.items():
        documented = fragment_options(FRAGMENTS[group])
        assert set(documented) == set(options), group
        for name, option in options.items():
            for key in COMPARED:
                assert documented[name].get(key) == option.get(key), f"{group}: {name}: {key}"
            for sub, suboption in (option.get("options") or {}).items():
                for key in COMPARED:
                    assert documented[name]["suboptions"][sub].get(key) == suboption.get(key), f"{name}.{sub}: {key}"


def test_a_renamed_option_stays_an_alias_deprecated_until_the_removal():
    spec = module_options({}, ("node_selection",), renamed={"nodes": "names"})
    assert spec["names"]["aliases"] == ["nodes"]
    assert spec["names"]["deprecated_aliases"] == [
        {"name": "nodes", "version": ALIAS_REMOVAL, "collection_name": "kubegpu.scheduling"}
    ]
    assert "aliases" not in GROUPS["node_selection"]["names"], "the group itself is left as declared"


def test_an_own_option_may_not_shadow_a_group_option():
    with pytest.raises(ValueError, match="parallelism"):
        module_options({"parallelism": {"type": "int"}}, ("parallelism",))


@pytest.mark.parametrize(
    "name, value, problem",
    [
        ("parallelism", 0, "parallelism must be between 1 and 256, not 0"),
        ("parallelism", 257, "parallelism must be between 1 and 256, not 257"),
        ("parallelism", 256, None),
        ("page_size", 0, "page_size must be at least 1, not 0"),
        ("wait_timeout", -1, "wait_timeout must be at least 0, not -1"),
        ("wait_timeout", 0, None),
        ("names", ["x"], None),
    ],
)
def test_ranges_name_the_option_and_its_bounds(name, value, problem):
    assert range_problem(name, value) == problem


def test_check_ranges_raises_an_option_error():
    with pytest.raises(OptionError, match="eviction_timeout must be at least 0, not -5"):
        check_ranges({"eviction_timeout": -5, "parallelism": 4})
