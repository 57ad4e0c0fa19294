"""The import layers CONTRIBUTING describes, held over every Python file under plugins/.

kube/ < gpu/ < options/ < findings/ < write/ < the feature folders (one per check: validate/,
device_plugin/, fleet/, admission/, ...) < modules/, inventory/ and filter/. A file imports only its own folder and the
layers below it; a feature folder never imports another one (admission/ reads the validator's
kinds from the registry, findings/, which is below it).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PLUGINS = Path(__file__).resolve().parents[2] / "plugins"
PACKAGE = "ansible_collections.kubegpu.scheduling.plugins."
# The layers of module_utils/, lowest first; every other folder of module_utils/ is a feature folder.
CORE_LAYERS = ("kube", "gpu", "options", "findings", "write")
FEATURE_RANK = len(CORE_LAYERS)
PLUGIN_RANK = FEATURE_RANK + 1  # modules/, inventory/, filter/: the wiring above everything


def unit_of(parts: tuple[str, ...]) -> tuple[str, int] | None:
    """The folder a plugins/-relative path (or dotted name) belongs to, and its rank."""
    if not parts:
        return None
    if parts[0] != "module_utils":
        return parts[0], PLUGIN_RANK
    if len(parts) < 2:
        return None
    folder = parts[1]
    return folder, CORE_LAYERS.index(folder) if folder in CORE_LAYERS else FEATURE_RANK


def imported_names(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, dotted name) of every import of the collection's own plugins, ``from X import Y``
    counted as X.Y so that ``from module_utils.findings import registry`` names its folder."""
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return [(line, name[len(PACKAGE) :]) for line, name in names if name.startswith(PACKAGE)]


def import_problem(importer: tuple[str, int], imported: tuple[str, int]) -> str | None:
    (folder, rank), (target, target_rank) = importer, imported
    if folder == target:
        return None
    if rank == FEATURE_RANK and target_rank == FEATURE_RANK:
        return f"feature folder {folder}/ imports feature folder {target}/"
    if target_rank >= rank:
        return f"{folder}/ imports {target}/, which is not below it"
    return None


def layer_breaks(plugins: Path) -> list[str]:
    """Every import that breaks the layers, as 'file:line: import name: why'."""
    breaks = []
    for path in sorted(plugins.rglob("*.py")):
        relative = path.relative_to(plugins)
        importer = unit_of(relative.parts[:-1] or (relative.stem,))
        if importer is None:
            continue
        for line, name in imported_names(ast.parse(path.read_text(), str(path))):
            imported = unit_of(tuple(name.split(".")))
            problem = imported and import_problem(importer, imported)
            if problem:
                breaks.append(f"plugins/{relative}:{line}: import {name}: {problem}")
    return breaks


def test_every_import_under_plugins_keeps_the_layers():
    breaks = layer_breaks(PLUGINS)
    assert not breaks, "imports that break the layers (CONTRIBUTING.md, The layers):\n" + "\n".join(breaks)


@pytest.mark.parametrize(
    "where, source, problem",
    [
        ("module_utils/kube/x.py", "from {p}module_utils.gpu.models import MODEL", "kube/ imports gpu/"),
        ("module_utils/gpu/x.py", "from {p}module_utils.findings import registry", "gpu/ imports findings/"),
        ("module_utils/findings/x.py", "import {p}module_utils.fleet.facts", "findings/ imports fleet/"),
        ("module_utils/fleet/x.py", "from {p}module_utils.device_plugin.verdict import evaluate", "fleet/ imports"),
        ("module_utils/admission/x.py", "from {p}module_utils.validate.rules import CHECKS", "admission/ imports"),
        ("module_utils/report/x.py", "from {p}modules.gpu_pod import main", "report/ imports modules/"),
    ],
)
def test_a_wrong_import_is_named_with_its_file_and_line(tmp_path, where, source, problem):
    path = tmp_path / where
    path.parent.mkdir(parents=True)
    path.write_text("'''doc'''\n" + source.format(p=PACKAGE) + "\n")
    (breaks,) = layer_breaks(tmp_path)
    assert breaks.startswith(f"plugins/{where}:2: import ") and problem in breaks


def test_imports_down_the_layers_and_within_a_folder_pass(tmp_path):
    files = {
        "module_utils/kube/a.py": "from {p}module_utils.kube.b import B",
        "module_utils/findings/kinds/v.py": "from {p}module_utils.gpu.models import MODEL",
        "module_utils/admission/p.py": "from {p}module_utils.findings.catalogue import KINDS",
        "modules/m.py": "from {p}module_utils.validate.checker import PodChecker",
    }
    for where, source in files.items():
        (tmp_path / where).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / where).write_text(source.format(p=PACKAGE) + "\n")
    assert layer_breaks(tmp_path) == []


def fail_json_calls(plugins: Path) -> list[str]:
    """Every call of fail_json under plugins/ but the one in errors_fail (kube/module.py)."""
    calls = []
    for path in sorted(plugins.rglob("*.py")):
        relative = path.relative_to(plugins)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "fail_json":
                calls.append(f"plugins/{relative}:{node.lineno}")
    return [call for call in calls if not call.startswith("plugins/module_utils/kube/module.py:")]


def test_modules_fail_only_through_errors_fail():
    calls = fail_json_calls(PLUGINS)
    assert not calls, "raise a KubegpuError (CheckFailed for a failed verdict) instead of fail_json at:\n" + "\n".join(
        calls
    )
