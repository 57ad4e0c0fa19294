# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One severity scale for the findings of every check, most severe first, and counts in words."""

from __future__ import annotations

ERROR = "error"
WARNING = "warning"
INFO = "info"
SEVERITIES = (ERROR, WARNING, INFO)


def severity_rank(severity: str) -> int:
    """Position on the scale, for sorting errors first; an unknown severity sorts last."""
    return SEVERITIES.index(severity) if severity in SEVERITIES else len(SEVERITIES)


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"
