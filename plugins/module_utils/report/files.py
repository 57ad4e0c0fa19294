# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The report's files: which file each form goes to, and the only reads and writes of the report."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.report.render_html import render_html
from ansible_collections.kubegpu.scheduling.plugins.module_utils.report.render_json import render_json
from ansible_collections.kubegpu.scheduling.plugins.module_utils.report.render_markdown import render_markdown

FORMATS: dict[str, tuple[str, Callable[[Mapping[str, Any]], str]]] = {
    "json": (".json", render_json),
    "markdown": (".md", render_markdown),
    "html": (".html", render_html),
}


def report_files(report: Mapping[str, Any], dest: str, basename: str, formats: list[str]) -> dict[str, tuple[str, str]]:
    """Per format, the file it goes to and its content."""
    if not basename or os.sep in basename or basename in (".", ".."):
        raise OptionError(f"basename must be a plain file name without '{os.sep}', got {basename!r}")
    return {form: (os.path.join(dest, basename + FORMATS[form][0]), FORMATS[form][1](report)) for form in formats}


def current_text(path: str) -> str | None:
    """The file's content, or None when there is none yet."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise OptionError(f"cannot read the existing report {path}: {exc}") from None


def write_text(path: str, text: str) -> None:
    """Write through a temporary file in the same folder, so a reader never sees half a report."""
    folder = os.path.dirname(path) or "."
    try:
        os.makedirs(folder, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=".fleet-report-")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except OSError as exc:
        raise OptionError(f"cannot write the report {path}: {exc}") from None
