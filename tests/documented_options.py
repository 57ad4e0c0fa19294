"""A module's documented options as ansible-doc shows them: those of the option-group fragments it
extends (kubegpu.scheduling.options.<group>), then its own, which override a fragment's option
wholesale, as Ansible merges them."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import yaml

from ansible_collections.kubegpu.scheduling.plugins.doc_fragments.options import ModuleDocFragment

GROUP_FRAGMENT = "kubegpu.scheduling.options."


def documented_options(module: ModuleType) -> dict[str, Any]:
    doc = yaml.safe_load(module.DOCUMENTATION)
    options: dict[str, Any] = {}
    for fragment in doc.get("extends_documentation_fragment") or []:
        if fragment.startswith(GROUP_FRAGMENT):
            group = fragment[len(GROUP_FRAGMENT) :]
            options.update(yaml.safe_load(getattr(ModuleDocFragment, group.upper()))["options"])
    options.update(doc.get("options") or {})
    return options


def spec_drift(module: ModuleType, own: dict[str, Any]) -> list[str]:
    """How the argument spec `own` (the module's options without the connection options) departs
    from its documentation: options missing either side, and type, default, elements, choices and
    aliases that differ."""
    documented = documented_options(module)
    found = [f"{name}: not documented" for name in sorted(set(own) - set(documented))]
    found += [f"{name}: documented, not in the spec" for name in sorted(set(documented) - set(own))]
    for name in sorted(set(own) & set(documented)):
        for key in ("type", "default", "elements", "choices", "aliases"):
            spec_value, doc_value = own[name].get(key), documented[name].get(key)
            if key == "type":
                spec_value = spec_value or "str"
                doc_value = doc_value or "str"
            if spec_value != doc_value:
                found.append(f"{name}: {key} {spec_value!r} in the spec, {doc_value!r} documented")
    return found
