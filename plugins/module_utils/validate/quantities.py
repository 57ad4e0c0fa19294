# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU quantities as the API server validates them, with its own messages."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.quantity import (
    QUANTITY_PATTERN_MESSAGE,
    QuantityError,
    format_quantity,
    is_whole,
    parse_quantity,
    server_admits_fraction,
)


@dataclass(frozen=True)
class QuantityIssue:
    rule: str
    path: str
    message: str


def quantity_issues(raw: Any, api_path: str, path: str, resource: str) -> tuple[Decimal | None, list[QuantityIssue]]:
    """Parse one GPU quantity; the issues carry the API server's message where it would reject it."""
    field_path = f"{api_path}[{resource}]"
    try:
        value = parse_quantity(raw)
    except QuantityError:
        message = f"{field_path}: Invalid value: {raw!r}: {QUANTITY_PATTERN_MESSAGE}"
        return None, [QuantityIssue("KGPU405", path, message)]
    if value < 0:
        return value, [
            QuantityIssue(
                "KGPU404",
                path,
                f'{field_path}: Invalid value: "{format_quantity(value)}": must be greater than or equal to 0',
            )
        ]
    if not is_whole(value):
        if server_admits_fraction(value):
            message = (
                f"{resource} quantity {raw!r} is not a whole number. The API server admits it (its "
                "integer check rounds milli-units up) and stores it as "
                f"{int(value.to_integral_value(rounding=ROUND_CEILING))}."
            )
        else:
            message = f'{field_path}: Invalid value: "{format_quantity(value)}": must be an integer'
        return value, [QuantityIssue("KGPU403", path, message)]
    return value, []
