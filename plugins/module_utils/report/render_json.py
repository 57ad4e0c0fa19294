# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet report as JSON (schema: docs/fleet-report.schema.json)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def render_json(report: Mapping[str, Any]) -> str:
    return json.dumps(report, indent=2, ensure_ascii=False) + "\n"
