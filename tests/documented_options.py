"""A module's documented options as ansible-doc shows them: those of the collection's doc fragments it
extends (kubegpu.scheduling.<fragment>, or kubegpu.scheduling.options.<group> for one option group), in
order, then its own, which override a fragment's option wholesale, as Ansible merges them."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import yaml

COLLECTION = "kubegpu.scheduling."
FRAGMENTS = "ansible_collections.kubegpu.scheduling.plugins.doc_fragments"
COMPARED = ("type", "default", "elements", "choices", "aliases")


def fragment_options(name: str) -> dict[str, Any]:
    """The options a fragment of this collection documents, by its name in extends_documentation_fragment."""
    fragment, _dot, variable = name[len(COLLECTION) :].partition(".")
    holder = importlib.import_module(f"{FRAGMENTS}.{fragment}").ModuleDocFragment
    return yaml.safe_load(getattr(holder, (variable or "documentation").upper())).get("options") or {}


def documented_options(module: ModuleType) -> dict[str, Any]:
    doc = yaml.safe_load(module.DOCUMENTATION)
    options: dict[str, Any] = {}
    for name in doc.get("extends_documentation_fragment") or []:
        if name.startswith(COLLECTION):
            options.update(fragment_options(name))
    options.update(doc.get("options") or {})
    return options


def spec_drift(module: ModuleType, spec: dict[str, Any]) -> list[str]:
    """How the argument spec departs from the module's documentation: options missing either side, and
    type, default, elements, choices and aliases that differ."""
    documented = documented_options(module)
    found = [f"{name}: not documented" for name in sorted(set(spec) - set(documented))]
    found += [f"{name}: documented, not in the spec" for name in sorted(set(documented) - set(spec))]
    for name in sorted(set(spec) & set(documented)):
        for key in COMPARED:
            in_spec, in_doc = spec[name].get(key), documented[name].get(key)
            if key == "type":
                in_spec, in_doc = in_spec or "str", in_doc or "str"
            if in_spec != in_doc:
                found.append(f"{name}: {key} {in_spec!r} in the spec, {in_doc!r} documented")
    return found
