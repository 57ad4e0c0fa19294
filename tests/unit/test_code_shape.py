"""The sizes the project holds its Python to under plugins/: no function of 60 lines or more, none
with more than 6 parameters (self and cls not counted, *args and **kwargs counted), no file over
600 lines. Each failure names the file, the line and the function."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PLUGINS = Path(__file__).resolve().parents[2] / "plugins"
MAX_FUNCTION_LINES = 59
MAX_PARAMETERS = 6
MAX_FILE_LINES = 600


def functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def parameter_count(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    args = function.args
    named = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs) if a.arg not in ("self", "cls")]
    return len(named) + (args.vararg is not None) + (args.kwarg is not None)


def oversized(plugins: Path) -> list[str]:
    """Every function or file over the limits, as 'file:line name: what'."""
    found = []
    for path in sorted(plugins.rglob("*.py")):
        text = path.read_text()
        relative = path.relative_to(plugins.parent)
        if text.count("\n") > MAX_FILE_LINES:
            found.append(f"{relative}: {text.count(chr(10))} lines (at most {MAX_FILE_LINES})")
        for function in functions(ast.parse(text, str(path))):
            lines = (function.end_lineno or function.lineno) - function.lineno + 1
            where = f"{relative}:{function.lineno} {function.name}"
            if lines > MAX_FUNCTION_LINES:
                found.append(f"{where}: {lines} lines (under 60)")
            if parameter_count(function) > MAX_PARAMETERS:
                found.append(f"{where}: {parameter_count(function)} parameters (at most {MAX_PARAMETERS})")
    return found


def test_no_function_under_plugins_is_too_long_or_takes_too_many_parameters():
    found = oversized(PLUGINS)
    assert not found, "over the limits of CONTRIBUTING.md's style:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "source, problem",
    [
        ("def f(a, b, c, d, e, f, g):\n    pass\n", "f: 7 parameters"),
        ("def f(self, a, *args, **kwargs):\n    pass\n" + "", None),
        ("def f():\n" + "    x = 1\n" * 59 + "", "f: 60 lines"),
        ("def f():\n" + "    x = 1\n" * 58 + "", None),
        ("class C:\n    def m(self, a, b, c, d, e, f):\n        pass\n", None),
    ],
)
def test_the_limits_bite_at_their_edge(tmp_path, source, problem):
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "x.py").write_text(source)
    found = oversized(tmp_path / "plugins")
    assert (found == []) if problem is None else (len(found) == 1 and problem in found[0])


# Every module that writes to the cluster runs on the write layer's skeleton (write/module.py).
WRITE_MODULES = (
    "gpu_admission_policy",
    "gpu_alert_rules",
    "gpu_device_plugin",
    "gpu_device_quarantine",
    "gpu_driver_upgrade",
    "gpu_node_label",
    "gpu_node_quarantine",
    "gpu_node_release",
    "gpu_pod",
)
MAX_WRITE_MODULE_CODE_LINES = 70
DOC_STRINGS = ("DOCUMENTATION", "EXAMPLES", "RETURN")


def code_lines(source: str) -> int:
    """Lines of code: not blank, not a comment, not in a docstring or the module's docs."""
    tree = ast.parse(source)
    skipped: set[int] = set()
    for node in ast.walk(tree):
        documented = isinstance(node, ast.Assign) and any(getattr(t, "id", "") in DOC_STRINGS for t in node.targets)
        docstring = isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Constant)
        if documented or docstring:
            skipped.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    lines = source.splitlines()
    return sum(
        1
        for number, line in enumerate(lines, 1)
        if number not in skipped and line.strip() and not line.strip().startswith("#")
    )


@pytest.mark.parametrize("module", WRITE_MODULES)
def test_a_write_module_is_wiring(module):
    source = (PLUGINS / "modules" / f"{module}.py").read_text()
    assert "run_write_module" in source, f"{module} does not run on write/module.py's run_write_module"
    assert code_lines(source) <= MAX_WRITE_MODULE_CODE_LINES, f"{module}: {code_lines(source)} code lines"


def test_code_lines_leave_out_docs_comments_and_blanks():
    source = 'DOCUMENTATION = r"""\na: 1\n"""\n\n# why\ndef f():\n    """Doc."""\n    return 1\n'
    assert code_lines(source) == 2
