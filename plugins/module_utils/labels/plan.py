# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which nodes get which accelerator label: options, compact nodes and one plan per node, pure."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import MODEL_SOURCE as DRA_MODEL_SOURCE
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.models import (
    DEFAULT_MODEL_LABEL_KEYS,
    is_valid_label_value,
    label_key_problem,
    looks_like_gpu_node,
    names_a_model,
    sanitize_label_value,
    split_model_suffixes,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.patches import JsonPatch, member_ops
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import string_map
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.quantity import gpu_count

DEFAULT_LABEL_KEY = "accelerator"
OWNERSHIP_ANNOTATION = "kubegpu.io/managed-labels"
MIXED_MODELS_CHOICES = ("skip", "first")
_MODEL_TOKEN_SPLIT = re.compile(r"[^a-z0-9]+")
_MEMORY_TOKEN = re.compile(r"^\d+gb$")

# Brand words providers add or leave out for the same chip (Tesla-T4, nvidia-tesla-t4, t4).
_BRAND_TOKENS = frozenset({"nvidia", "tesla", "geforce", "quadro"})


class Outcome(str, Enum):
    LABEL = "label"
    UNLABEL = "unlabel"
    UNCHANGED = "unchanged"
    CONFLICT = "conflict"
    SKIP = "skip"


@dataclass(frozen=True)
class LabelingOptions:
    label_key: str = DEFAULT_LABEL_KEY
    source_keys: tuple[str, ...] = tuple(k for k in DEFAULT_MODEL_LABEL_KEYS if k != DEFAULT_LABEL_KEY)
    value_overrides: Mapping[str, str] = field(default_factory=dict)
    remove_from_non_gpu: bool = False
    mixed_models: str = "skip"
    force: bool = False


@dataclass(frozen=True)
class CompactNode:
    """The few fields of a Node that labeling needs."""

    name: str
    labels: Mapping[str, str]
    ownership: str | None = None
    # Whether metadata has an annotations map at all (the API server leaves an empty one out).
    has_annotations: bool = False
    gpu_capacity: Mapping[str, int] = field(default_factory=dict)
    # The model the node's DRA devices name (their productName), for nodes without a model label.
    dra_model: str | None = None


@dataclass(frozen=True)
class NodePlan:
    """What to do with one node's label: the value before and after, and the patch that does it."""

    name: str
    outcome: Outcome
    before: str | None
    after: str | None
    desired: str | None = None
    reason: str = ""
    patch: JsonPatch | None = None
    models: tuple[tuple[str, str], ...] = ()
    forced: bool = False


def build_options(
    label_key: object = DEFAULT_LABEL_KEY,
    model_label_keys: Sequence[object] | None = None,
    value_overrides: Mapping[object, object] | None = None,
    remove_from_non_gpu: bool = False,
    mixed_models: object = "skip",
    force: bool = False,
) -> LabelingOptions:
    """Checked options; the label key itself is never a source of the model (it would feed itself)."""
    problem = label_key_problem(label_key)
    if problem or not isinstance(label_key, str):
        raise OptionError(f"label_key {label_key!r} is not a valid label key: {problem}")
    keys = DEFAULT_MODEL_LABEL_KEYS if model_label_keys is None else model_label_keys
    for key in keys:
        problem = label_key_problem(key)
        if problem:
            raise OptionError(f"model_label_keys: {key!r} is not a valid label key: {problem}")
    source_keys = tuple(dict.fromkeys(str(k) for k in keys if k != label_key))
    if not source_keys:
        raise OptionError(f"model_label_keys must name at least one label key other than label_key ({label_key!r})")
    overrides: dict[str, str] = {}
    for model, value in (value_overrides or {}).items():
        if not isinstance(value, str) or not value or not is_valid_label_value(value):
            raise OptionError(
                f"value_overrides[{model!r}]: {value!r} is not a valid label value (at most 63 characters: "
                "alphanumerics, '-', '_' or '.', starting and ending alphanumeric)"
            )
        overrides[str(model)] = value
    if mixed_models not in MIXED_MODELS_CHOICES:
        raise OptionError(f"mixed_models must be one of {', '.join(MIXED_MODELS_CHOICES)}, not {mixed_models!r}")
    return LabelingOptions(
        label_key=label_key,
        source_keys=source_keys,
        value_overrides=overrides,
        remove_from_non_gpu=bool(remove_from_non_gpu),
        mixed_models=str(mixed_models),
        force=bool(force),
    )


def compact_node(item: object, is_gpu: Callable[[str], bool]) -> CompactNode | None:
    """The fields labeling needs from a Node as the API returns it; None when it has no name."""
    if not isinstance(item, dict):
        return None
    metadata = item.get("metadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str) or not metadata["name"]:
        return None
    annotations = string_map(metadata.get("annotations"))
    status = item.get("status")
    capacity = status.get("capacity") if isinstance(status, dict) else None
    gpus = {str(k): gpu_count(v) for k, v in capacity.items() if is_gpu(str(k))} if isinstance(capacity, dict) else {}
    return CompactNode(
        name=metadata["name"],
        labels=string_map(metadata.get("labels")),
        ownership=annotations.get(OWNERSHIP_ANNOTATION),
        has_annotations=bool(annotations),
        gpu_capacity=gpus,
    )


def read_ownership(annotation: str | None) -> dict[str, str]:
    """Label key -> the value the collection wrote, from the ownership annotation.

    A malformed annotation proves nothing, so it gives no ownership at all.
    """
    if not annotation:
        return {}
    try:
        records = json.loads(annotation)
    except ValueError:
        return {}
    if not isinstance(records, dict):
        return {}
    return {str(k): v for k, v in records.items() if isinstance(v, str)}


def ownership_annotation(records: Mapping[str, str]) -> str | None:
    """The annotation value for these records; None (remove the annotation) when there are none."""
    if not records:
        return None
    return json.dumps(dict(records), sort_keys=True, separators=(",", ":"))


def model_names(labels: Mapping[str, str], keys: Sequence[str]) -> list[tuple[str, str]]:
    """(key, value) for every source key whose value names a model, in key order."""
    found = []
    for key in keys:
        value = labels.get(key, "").strip()
        if value and names_a_model(value):
            found.append((key, value))
    return found


def model_tokens(value: str) -> tuple[str, ...]:
    base = split_model_suffixes(value.strip())[0]
    return tuple(t for t in _MODEL_TOKEN_SPLIT.split(base.lower()) if t and t not in _BRAND_TOKENS)


def _chip(tokens: tuple[str, ...]) -> tuple[str, ...]:
    # The chip is the first token with a digit (a100, t4, l40s, a10g, 3090); names without one
    # (TITAN-X-Pascal) are compared whole.
    for token in tokens:
        if any(c.isdigit() for c in token):
            return (token,)
    return tokens


def same_model(first: str, second: str) -> bool:
    """Whether two providers' names denote the same GPU model.

    Providers spell one model differently (`NVIDIA-A100-SXM4-40GB`, `nvidia-tesla-a100`, `a100`),
    so names agree when their chips agree and their memory sizes, where both state one, agree.
    MIG and sharing suffixes are ignored: they describe how the GPU is split, not which it is.
    """
    a, b = model_tokens(first), model_tokens(second)
    if _chip(a) != _chip(b):
        return False
    memory_a = {t for t in a if _MEMORY_TOKEN.match(t)}
    memory_b = {t for t in b if _MEMORY_TOKEN.match(t)}
    return not memory_a or not memory_b or bool(memory_a & memory_b)


def names_mixed_models(names: Sequence[tuple[str, str]]) -> bool:
    return any(not same_model(names[0][1], value) for _key, value in names[1:])


def label_value_for(model: str, overrides: Mapping[str, str]) -> str | None:
    """The label value for a model name: its override (by raw or sanitized name), else the sanitized name."""
    sanitized = sanitize_label_value(model)
    if model in overrides:
        return overrides[model]
    if sanitized in overrides:
        return overrides[sanitized]
    return sanitized or None


def describe_models(names: Sequence[tuple[str, str]]) -> str:
    return ", ".join(f"{key}={value}" for key, value in names)


def label_patch(node: CompactNode, key: str, value: str | None, records: Mapping[str, str]) -> JsonPatch:
    """One JSON patch that sets (or, with None, removes) the label and records it as ours.

    It depends only on the label and the ownership annotation as read: it fails (and the node is
    read again) when either changed meanwhile, and applies whatever else changed, such as the
    status a node's heartbeat writes.
    """
    updated = {k: v for k, v in records.items() if k != key}
    if value is not None:
        updated[key] = value
    label_guard, label_write = member_ops(bool(node.labels), "labels", key, node.labels.get(key), value)
    annotated = node.has_annotations or node.ownership is not None
    record_guard, record_write = member_ops(
        annotated, "annotations", OWNERSHIP_ANNOTATION, node.ownership, ownership_annotation(updated)
    )
    return label_guard + record_guard + label_write + record_write


def _desired_value(
    node: CompactNode, options: LabelingOptions, is_gpu: Callable[[str], bool]
) -> tuple[str | None, tuple[tuple[str, str], ...], NodePlan | None]:
    """The value the label should have (None: not a GPU node) and the model labels that name it
    when they disagree, or a plan that settles the node without a value (skipped)."""
    current = node.labels.get(options.label_key)
    if not node.dra_model and not looks_like_gpu_node(node.labels, node.gpu_capacity, is_gpu, options.source_keys):
        return None, (), None
    names = model_names(node.labels, options.source_keys)
    if not names and node.dra_model:
        names = [(DRA_MODEL_SOURCE, node.dra_model)]
    if not names:
        reason = "GPU node without a model label (" + ", ".join(options.source_keys) + ") or DRA devices"
        return None, (), NodePlan(node.name, Outcome.SKIP, current, current, reason=reason)
    mixed = tuple(names) if names_mixed_models(names) else ()
    if mixed and options.mixed_models == "skip":
        reason = f"labels name different GPU models: {describe_models(names)}"
        return None, mixed, NodePlan(node.name, Outcome.SKIP, current, current, reason=reason, models=mixed)
    model_key, model = names[0]
    value = label_value_for(model, options.value_overrides)
    if value is None:
        reason = f"model {model!r} ({model_key}) leaves nothing usable as a label value"
        return None, mixed, NodePlan(node.name, Outcome.SKIP, current, current, reason=reason, models=mixed)
    return value, mixed, None


def plan_node(node: CompactNode, options: LabelingOptions, is_gpu: Callable[[str], bool]) -> NodePlan:
    """The decision for one node; `patch` is set only when the node must change."""
    key = options.label_key
    current = node.labels.get(key)
    records = read_ownership(node.ownership)
    owned = current is not None and records.get(key) == current
    desired, mixed, settled = _desired_value(node, options, is_gpu)
    if settled is not None:
        return settled
    if desired is None:
        if current is None or not options.remove_from_non_gpu:
            return NodePlan(node.name, Outcome.UNCHANGED, current, current)
        if not owned:
            reason = f"not a GPU node, but {key}={current} was not set by this collection: left in place"
            return NodePlan(node.name, Outcome.CONFLICT, current, current, reason=reason)
        return NodePlan(node.name, Outcome.UNLABEL, current, None, patch=label_patch(node, key, None, records))
    if current == desired:
        return NodePlan(node.name, Outcome.UNCHANGED, current, current, desired, models=mixed)
    if current is None or owned or options.force:
        patch = label_patch(node, key, desired, records)
        forced = current is not None and not owned
        return NodePlan(node.name, Outcome.LABEL, current, desired, desired, patch=patch, models=mixed, forced=forced)
    reason = f"{key}={current} was not set by this collection (the model says {desired}); force: true overwrites it"
    return NodePlan(node.name, Outcome.CONFLICT, current, current, desired, reason=reason, models=mixed)


def plan_nodes(nodes: Iterable[CompactNode], options: LabelingOptions, is_gpu: Callable[[str], bool]) -> list[NodePlan]:
    return sorted((plan_node(node, options, is_gpu) for node in nodes), key=lambda plan: plan.name)


def missing_plans(names: list[str], selector: str | None) -> list[NodePlan]:
    reason = "no such node" + (" matching label_selectors" if selector else "")
    return [NodePlan(name, Outcome.SKIP, None, None, reason=reason) for name in names]
