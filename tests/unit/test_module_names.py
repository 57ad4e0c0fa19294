"""Module names say what a module does: a module that only reads (it extends the read_only doc
fragment) ends in _info, _facts or _validate; a renamed module keeps its old name as a redirect in
meta/runtime.yml, with a deprecation, and Ansible's own loader resolves it to a module that exists."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
MODULES = ROOT / "plugins" / "modules"
READ_ONLY_ENDINGS = ("_info", "_facts", "_validate")
ROUTING = yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text())["plugin_routing"]["modules"]


def documentation(path: Path) -> dict:
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "DOCUMENTATION" for t in node.targets):
            return yaml.safe_load(ast.literal_eval(node.value))
    raise AssertionError(f"{path.name} has no DOCUMENTATION")


def read_only_modules() -> list[str]:
    return sorted(
        path.stem
        for path in MODULES.glob("gpu_*.py")
        if "kubegpu.scheduling.read_only" in (documentation(path).get("extends_documentation_fragment") or [])
    )


def test_every_read_only_module_is_named_for_reading():
    misnamed = [name for name in read_only_modules() if not name.endswith(READ_ONLY_ENDINGS)]
    assert read_only_modules(), "no module extends kubegpu.scheduling.read_only"
    assert not misnamed, f"read-only modules not ending in {READ_ONLY_ENDINGS}: {misnamed}"


# Ansible's own plugin loader, in a process of its own (the loader is process-wide state).
RESOLVE = """
import json, sys
from ansible.plugins.loader import init_plugin_loader, module_loader
init_plugin_loader()
found = {name: module_loader.find_plugin_with_context("kubegpu.scheduling." + name) for name in sys.argv[1:]}
print(json.dumps({name: c.resolved_fqcn if c.resolved else None for name, c in found.items()}))
"""


def test_every_old_module_name_redirects_with_a_deprecation_to_a_module():
    resolved = json.loads(
        subprocess.run([sys.executable, "-c", RESOLVE, *ROUTING], check=True, capture_output=True, text=True).stdout
    )
    for old, route in ROUTING.items():
        assert route["deprecation"]["removal_version"] and route["deprecation"]["warning_text"], old
        assert not (MODULES / f"{old}.py").exists(), f"{old} is both a module and a redirect"
        assert resolved[old] == route["redirect"], f"{old} resolves to {resolved[old]}"
        assert (MODULES / f"{route['redirect'].rsplit('.', 1)[1]}.py").exists()
