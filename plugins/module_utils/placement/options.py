# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The placement options from a module's or the command line's parameters, checked."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.models import DEFAULT_MODEL_LABEL_KEYS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import NVIDIA_GPU
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import as_mapping, as_text
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.quantity import QuantityError, parse_quantity
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.fleet import PlacementOptions
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.requests import CPU, MEMORY, amount

DEFAULT_SIZES = (1, 2, 4, 8)
TOLERATION_OPERATORS = ("Exists", "Equal")


def _quantity(name: str, value: object) -> int:
    if value in (None, ""):
        return 0
    try:
        parse_quantity(value)
    except QuantityError:
        raise OptionError(
            f"shape.{name} must be a Kubernetes quantity (such as 8 or 500m, 32Gi), not {value!r}"
        ) from None
    return amount(name, value)


def _toleration(raw: object, index: int) -> dict[str, str]:
    toleration = as_mapping(raw)
    if not toleration:
        raise OptionError(f"shape.tolerations[{index}] must be a mapping with key, operator, value and effect")
    found = {key: as_text(toleration.get(key)) for key in ("key", "operator", "value", "effect")}
    found["operator"] = found["operator"] or "Equal"
    if found["operator"] not in TOLERATION_OPERATORS:
        raise OptionError(f"shape.tolerations[{index}].operator must be Exists or Equal, not {found['operator']!r}")
    return found


def placement_options(
    sizes: Sequence[int] | None = None,
    resource: str = NVIDIA_GPU,
    model_label_keys: Sequence[str] = DEFAULT_MODEL_LABEL_KEYS,
    pool_label_keys: Sequence[str] = (),
    shape: Mapping[str, Any] | None = None,
) -> PlacementOptions:
    wanted = tuple(sorted(set(sizes or DEFAULT_SIZES)))
    if any(size < 1 for size in wanted):
        raise OptionError(f"sizes must be whole numbers of GPUs of 1 or more, not {list(sizes or ())}")
    shape = shape or {}
    selector = as_mapping(shape.get("node_selector"))
    if any(not isinstance(v, str) for v in selector.values()):
        raise OptionError("shape.node_selector must map label keys to string values")
    return PlacementOptions(
        resource=resource,
        sizes=wanted,
        model_label_keys=tuple(model_label_keys),
        pool_label_keys=tuple(pool_label_keys),
        cpu=_quantity(CPU, shape.get("cpu")),
        memory=_quantity(MEMORY, shape.get("memory")),
        tolerations=tuple(_toleration(t, i) for i, t in enumerate(shape.get("tolerations") or [])),
        node_selector=dict(selector),
    )
