# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes resource quantities as exact decimals.

The API server compares quantities by value ("1" == "1000m") but its integer check rounds
milli-values up, so "0.9999" slips through; exact Decimal arithmetic does not.
"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import KubegpuError

# Decimal suffixes by power of ten, binary suffixes by power of 1024.
_DECIMAL_EXPONENTS = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIXES = ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_SUFFIX_MULTIPLIERS = {
    **{suffix: Decimal(10) ** exponent for suffix, exponent in _DECIMAL_EXPONENTS.items()},
    **{suffix: Decimal(1024) ** power for power, suffix in enumerate(_BINARY_SUFFIXES, start=1)},
}
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:\d+\.?\d*|\.\d+))"
    r"(?:(?P<exponent>[eE][+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$"
)


class QuantityError(KubegpuError, ValueError):
    """A value that is not a Kubernetes quantity."""


def parse_quantity(value: object) -> Decimal:
    """Return the exact value of a quantity given as a string or a YAML number."""
    if isinstance(value, bool) or value is None:
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(repr(value))
    if not isinstance(value, str):
        raise QuantityError(f"{value!r} is not a quantity")
    match = _QUANTITY.match(value.strip())
    if not match:
        raise QuantityError(f"{value!r} is not a quantity")
    try:
        number = Decimal(match["number"])
    except InvalidOperation as exc:  # pragma: no cover - the pattern only admits decimals
        raise QuantityError(f"{value!r} is not a quantity") from exc
    if match["exponent"]:
        return number.scaleb(int(match["exponent"][1:]))
    return number * _SUFFIX_MULTIPLIERS[match["suffix"] or ""]


def is_whole(value: Decimal) -> bool:
    return value == value.to_integral_value()


def gpu_count(value: object, default: int = 0) -> int:
    """A GPU quantity as an int; malformed or fractional values count as `default`."""
    try:
        parsed = parse_quantity(value)
    except QuantityError:
        return default
    return int(parsed) if is_whole(parsed) else default


_SI_SUFFIXES = ((18, "E"), (15, "P"), (12, "T"), (9, "G"), (6, "M"), (3, "k"), (0, ""), (-3, "m"), (-6, "u"), (-9, "n"))
QUANTITY_PATTERN_MESSAGE = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"


def format_quantity(value: Decimal) -> str:
    """The canonical decimal form the API server prints (`0.5` -> `500m`), rounded up to nano units."""
    if value == 0:
        return "0"
    if not is_whole(value.scaleb(9)):
        value = value.quantize(Decimal("1e-9"), rounding=ROUND_CEILING)
    for exponent, suffix in _SI_SUFFIXES:
        mantissa = value.scaleb(-exponent)
        if is_whole(mantissa):
            return f"{int(mantissa)}{suffix}"
    return str(value)  # pragma: no cover - every value is whole in nano units after quantizing


def server_admits_fraction(value: Decimal) -> bool:
    """The API server's integer check rounds milli-values up, so 0.9999 passes as 1."""
    milli = (value * 1000).to_integral_value(rounding=ROUND_CEILING)
    return milli % 1000 == 0
