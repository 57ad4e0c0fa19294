# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Quarantine of one failed DRA device with a DeviceTaintRule of the collection's own, pure.

Facts from the Kubernetes 1.37.2 source (k8s.io/kubernetes@v1.37.2):
- pkg/features/kube_features.go: DRADeviceTaints and DRADeviceTaintRules are GA and on by default in
  1.37, so resource.k8s.io/v1 DeviceTaintRules are served without a feature gate or runtime-config.
- cmd/kube-controller-manager/app/resource.go: the device-taint-eviction-controller needs only those
  gates, so kube-controller-manager runs it by default.
- pkg/controller/devicetainteviction/device_taint_eviction.go: for effect None the controller writes
  the condition EvictionInProgress with reason NoEffect and a message counting the published and
  allocated devices selected and the pods that would be evicted, once per generation of the rule;
  for NoExecute it deletes the pods (a plain DELETE: PodDisruptionBudgets are not consulted).
- k8s.io/dynamic-resource-allocation@v0.37.2 resourceclaim/pod.go PodClaims: 1.37.2 counts the
  claim of pod.status.extendedResourceClaimStatus too; releases before the fix of
  kubernetes/kubernetes issue 141290 do not, so such pods are evicted through the Eviction API here.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import EXTENDED_RESOURCE_CLAIM_ANNOTATION
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import as_list, as_mapping, as_text

OWNER_LABEL = "kubegpu.io/quarantine"
OWNER_LABEL_VALUE = "device"
WHO_ANNOTATION = "kubegpu.io/quarantined-by"
WHY_ANNOTATION = "kubegpu.io/quarantine-reason"
WHEN_ANNOTATION = "kubegpu.io/quarantined-at"
DEFAULT_TAINT_KEY = "kubegpu.io/device-quarantine"
EFFECT_NONE = "None"
EFFECTS = ("NoSchedule", "NoExecute")
EVICTION_CONDITION = "EvictionInProgress"
SELECTOR_FIELDS = ("driver", "pool", "device")
RULE_PREFIX = "kubegpu-device-"
_NAME_PART = re.compile(r"[^a-z0-9.-]+")
_NONE_MESSAGE = re.compile(
    r"(?P<published>\d+) published devices? selected\. (?P<allocated>\d+) allocated devices? selected\. "
    r"(?P<pods>\d+) pods? would be evicted in (?P<namespaces>\d+)"
)


@dataclass(frozen=True, order=True)
class DeviceRef:
    """One device: what a DeviceTaintRule's selector names, all three fields set."""

    driver: str
    pool: str
    device: str

    def text(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


def parse_devices(value: object, option: str = "devices") -> list[DeviceRef]:
    """The devices asked for; an empty list, a missing or empty field (a selector that would pick
    more than one device, up to every device of every driver) is refused naming where."""
    items = value if isinstance(value, list) else None
    if not items:
        raise OptionError(f"{option} must name at least one device (driver, pool and device)")
    refs = []
    for index, item in enumerate(items):
        entry = item if isinstance(item, Mapping) else {}
        missing = [key for key in SELECTOR_FIELDS if not isinstance(entry.get(key), str) or not entry[key].strip()]
        if missing:
            raise OptionError(
                f"{option}[{index}] lacks {', '.join(missing)}: a DeviceTaintRule without them selects more than "
                "one device (with none, every device in the cluster), so it is refused"
            )
        refs.append(DeviceRef(*(str(entry[key]).strip() for key in SELECTOR_FIELDS)))
    return sorted(set(refs))


def published_devices(slices: Iterable[Mapping[str, Any]]) -> dict[DeviceRef, str]:
    """Every device of the projected slices (driver, pool, node, devices[].name) -> its node."""
    return {
        DeviceRef(s["driver"], s["pool"], d["name"]): s.get("node") or "" for s in slices for d in s.get("devices", [])
    }


def unknown_devices(refs: Sequence[DeviceRef], published: Mapping[DeviceRef, str]) -> list[str]:
    """The devices asked for that no ResourceSlice publishes: a rule on them would taint nothing now."""
    return [ref.text() for ref in refs if ref not in published]


def rule_name(ref: DeviceRef) -> str:
    """A stable name per device: readable parts and a hash of the exact triple, within 253 characters."""
    digest = hashlib.sha256(ref.text().encode()).hexdigest()[:10]
    readable = "-".join(_NAME_PART.sub("-", part.lower()).strip("-.") for part in (ref.pool, ref.device))
    return f"{RULE_PREFIX}{readable[:200].strip('-.')}-{digest}"


def rule_body(ref: DeviceRef, taint_key: str, effect: str, owner: Mapping[str, str]) -> dict[str, Any]:
    """The DeviceTaintRule for one device, marked as the collection's with who, why and when."""
    annotations = {WHO_ANNOTATION: owner["who"], WHY_ANNOTATION: owner["why"], WHEN_ANNOTATION: owner["when"]}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": rule_name(ref), "labels": {OWNER_LABEL: OWNER_LABEL_VALUE}, "annotations": annotations},
        "spec": {
            "deviceSelector": {"driver": ref.driver, "pool": ref.pool, "device": ref.device},
            "taint": {"key": taint_key, "value": "failed", "effect": effect},
        },
    }


def owned_rule(rule: Mapping[str, Any]) -> bool:
    labels = as_mapping(as_mapping(rule.get("metadata")).get("labels"))
    return labels.get(OWNER_LABEL) == OWNER_LABEL_VALUE


def rule_device(rule: Mapping[str, Any]) -> DeviceRef | None:
    selector = as_mapping(as_mapping(rule.get("spec")).get("deviceSelector"))
    parts = [as_text(selector.get(key)) for key in SELECTOR_FIELDS]
    return DeviceRef(*parts) if all(parts) else None


def rule_effect(rule: Mapping[str, Any]) -> str:
    return as_text(as_mapping(as_mapping(rule.get("spec")).get("taint")).get("effect"))


def simulation(rule: Mapping[str, Any]) -> dict[str, int] | None:
    """What the controller says a rule with effect None would do, once it has looked at this
    generation of it: published and allocated devices selected, pods and namespaces; None before."""
    metadata, status = as_mapping(rule.get("metadata")), as_mapping(rule.get("status"))
    for condition in as_list(status.get("conditions")):
        condition = as_mapping(condition)
        if condition.get("type") != EVICTION_CONDITION or condition.get("reason") != "NoEffect":
            continue
        if condition.get("observedGeneration") != metadata.get("generation"):
            return None
        found = _NONE_MESSAGE.search(as_text(condition.get("message")))
        return {key: int(value) for key, value in found.groupdict().items()} if found else None
    return None


def device_users(claims: Iterable[Mapping[str, Any]], ref: DeviceRef) -> list[dict[str, Any]]:
    """The pods that use the device through an allocated claim: namespace, name, the claim, and how
    (`claim` for a ResourceClaim the pod names; `extended_resource` for the claim kube-scheduler made
    for an extended resource a DeviceClass serves)."""
    users = []
    for claim in claims:
        metadata, status = as_mapping(claim.get("metadata")), as_mapping(claim.get("status"))
        results = as_list(as_mapping(as_mapping(status.get("allocation")).get("devices")).get("results"))
        if not any(_result_uses(as_mapping(r), ref) for r in results):
            continue
        extended = as_mapping(metadata.get("annotations")).get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) == "true"
        for consumer in as_list(status.get("reservedFor")):
            consumer = as_mapping(consumer)
            if consumer.get("resource") == "pods" and not consumer.get("apiGroup"):
                users.append(
                    {
                        "namespace": as_text(metadata.get("namespace")),
                        "name": as_text(consumer.get("name")),
                        "claim": as_text(metadata.get("name")),
                        "through": "extended_resource" if extended else "claim",
                    }
                )
    return sorted(users, key=lambda u: (u["namespace"], u["name"], u["claim"]))


def _result_uses(result: Mapping[str, Any], ref: DeviceRef) -> bool:
    return not result.get("adminAccess") and (result.get("driver"), result.get("pool"), result.get("device")) == (
        ref.driver,
        ref.pool,
        ref.device,
    )


def rule_step(existing: Mapping[str, Any] | None, effect: str) -> str:
    """What one device needs: `create` (with effect None first), `switch` (to the effect asked for),
    `none` (already so), or `foreign` (a rule of that name the collection does not own: left alone)."""
    if existing is None:
        return "create"
    if not owned_rule(existing):
        return "foreign"
    return "none" if rule_effect(existing) == effect else "switch"


def releasable(rules: Iterable[Mapping[str, Any]], refs: Sequence[DeviceRef]) -> list[str]:
    """The names of the rules to delete on release: only those the collection made, on those devices."""
    wanted = set(refs)
    names = []
    for rule in rules:
        name, device = as_text(as_mapping(rule.get("metadata")).get("name")), rule_device(rule)
        if owned_rule(rule) and device in wanted and device is not None and name == rule_name(device):
            names.append(name)
    return sorted(names)


def breaker_members(
    published: Mapping[DeviceRef, str], quarantined: Iterable[DeviceRef]
) -> list[tuple[tuple[tuple[str, str], ...], int, bool]]:
    """The members of each device pool (driver/pool) for the breaker: one GPU a device, and whether
    a rule of the collection already takes it out of service."""
    out = set(quarantined)
    return [(pool_keys(ref), 1, ref in out) for ref in sorted(published)]


def pool_keys(ref: DeviceRef) -> tuple[tuple[str, str], ...]:
    return (("pool", f"{ref.driver}/{ref.pool}"),)


def check_effect(effect: object) -> str:
    if effect not in EFFECTS:
        raise OptionError(f"effect must be one of {', '.join(EFFECTS)}, not {effect!r}")
    return str(effect)
