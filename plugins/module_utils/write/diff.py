# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The diff entry every write module returns in diff mode, as Ansible's diff callback reads it."""

from __future__ import annotations

from typing import Any


def diff_entry(header: str, before: Any, after: Any, note: str = "") -> dict[str, Any]:
    """Before and after of one object under `header` (for example `node/gpu-1`); `note` is added
    to the after header, in parentheses, where the change needs a word (a foreign value overwritten)."""
    return {
        "before_header": header,
        "after_header": f"{header} ({note})" if note else header,
        "before": before,
        "after": after,
    }
