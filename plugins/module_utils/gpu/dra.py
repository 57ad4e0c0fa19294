# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPUs through Dynamic Resource Allocation: the vocabulary of NVIDIA's DRA driver and the
resource.k8s.io/v1 objects, projected to the few fields the checks read.

NVIDIA's driver (``gpu.nvidia.com``) publishes one pool per node, named after the node, as
ResourceSlices; a pool's newest generation is what the scheduler allocates from. Slice names
change between releases, so slices are keyed on driver, pool and node, never on their names.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.models import ModelDetection, sanitize_label_value
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import (
    as_list,
    as_mapping,
    as_text,
    optional_int,
    string_map,
)

RESOURCE_API_VERSION = "resource.k8s.io/v1"
RESOURCE_API_GROUP = "resource.k8s.io"
DEVICE_CLASSES = "deviceclasses"
RESOURCE_SLICES = "resourceslices"
RESOURCE_CLAIMS = "resourceclaims"
# Served in resource.k8s.io/v1 by Kubernetes 1.37 (KEP-5055); older clusters serve it in an alpha
# or beta version behind the DRADeviceTaintRule feature gate, or not at all.
DEVICE_TAINT_RULES = "devicetaintrules"

NVIDIA_GPU_DRIVER = "gpu.nvidia.com"
GPU_DRIVERS = frozenset({NVIDIA_GPU_DRIVER})
# The DeviceClasses of the driver's Helm chart, and the device type each selects.
CHART_DEVICE_CLASSES = {"gpu.nvidia.com": "gpu", "mig.nvidia.com": "mig", "vfio.gpu.nvidia.com": "vfio"}
DEVICE_TYPE_GPU = "gpu"
DEVICE_TYPE_MIG = "mig"

# kube-scheduler marks the claim it makes for a pod's extended resources (KEP-5004) with this.
EXTENDED_RESOURCE_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
# What kube-scheduler's DRA plugin says of a pod none of whose candidate nodes can allocate its claims.
UNALLOCATABLE_CLAIMS_MESSAGE = "cannot allocate all claims"
TAINT_EFFECTS_THAT_KEEP_PODS_AWAY = ("NoSchedule", "NoExecute")
MODEL_SOURCE = "ResourceSlice productName"

# Namespaces where GPU system components (the driver, the GPU Operator, monitoring) run; a
# claim with admin access reaches devices in use by others, which only they should need.
GPU_SYSTEM_NAMESPACES = (
    "kube-system",
    "gpu-operator",
    "nvidia-gpu-operator",
    "nvidia-dra-driver-gpu",
    "dra-driver-nvidia-gpu",
    "nvidia-device-plugin",
)

_CEL_DRIVER = re.compile(r"""^device\.driver\s*==\s*['"]([^'"]+)['"]$""")
_CEL_ATTRIBUTE = re.compile(r"""^device\.attributes\[\s*['"]([^'"]+)['"]\s*\]\.(\w+)\s*==\s*['"]([^'"]*)['"]$""")
_CEL_OTHER_OPERATORS = re.compile(r"\|\||!(?!=)|\?|\bin\b|<|>")


# --- ResourceSlices ------------------------------------------------------------------------------


def _attribute_value(value: object) -> str | None:
    """A DeviceAttribute (one of string, version, int, bool) as text."""
    attribute = as_mapping(value)
    for kind in ("string", "version"):
        if isinstance(attribute.get(kind), str):
            return str(attribute[kind])
    for kind in ("int", "bool"):
        if kind in attribute and attribute[kind] is not None:
            return str(attribute[kind]).lower() if kind == "bool" else str(attribute[kind])
    return None


def device_attributes(device: Mapping[str, Any], driver: str) -> dict[str, str]:
    """The device's attributes as text; the driver's own may be written with or without its domain."""
    attributes = {}
    for name, value in as_mapping(device.get("attributes")).items():
        text = _attribute_value(value)
        if isinstance(name, str) and text is not None:
            attributes[name.removeprefix(f"{driver}/")] = text
    return attributes


def _device_taints(device: Mapping[str, Any]) -> list[dict[str, str | None]]:
    taints = []
    for taint in map(as_mapping, as_list(device.get("taints"))):
        if isinstance(taint.get("key"), str):
            taints.append({"key": taint["key"], "value": taint.get("value"), "effect": taint.get("effect")})
    return taints


def project_device(device: object, driver: str, pool: str) -> dict[str, Any] | None:
    raw = as_mapping(device)
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        return None
    attributes = device_attributes(raw, driver)
    memory = as_mapping(as_mapping(raw.get("capacity")).get("memory")).get("value")
    return {
        "name": name,
        "driver": driver,
        "pool": pool,
        "type": attributes.get("type"),
        "uuid": attributes.get("uuid"),
        "product": attributes.get("productName"),
        "profile": attributes.get("profile"),
        "parent_uuid": attributes.get("parentUUID"),
        "memory": str(memory) if isinstance(memory, (str, int)) else None,
        "attributes": attributes,
        "counter_sets": [
            as_text(as_mapping(c).get("counterSet")) for c in as_list(raw.get("consumesCounters")) if as_mapping(c)
        ],
        "taints": _device_taints(raw),
    }


def project_slice(item: object, drivers: frozenset[str] = GPU_DRIVERS) -> dict[str, Any] | None:
    """The fields of a ResourceSlice of a GPU driver, or None for another driver's or a malformed one."""
    spec = as_mapping(as_mapping(item).get("spec"))
    driver = spec.get("driver")
    pool = as_mapping(spec.get("pool"))
    pool_name = pool.get("name")
    if driver not in drivers or not isinstance(pool_name, str) or not pool_name:
        return None
    node = spec.get("nodeName")
    devices = [project_device(d, str(driver), pool_name) for d in as_list(spec.get("devices"))]
    return {
        "driver": driver,
        "node": node if isinstance(node, str) and node else None,
        "pool": pool_name,
        "generation": optional_int(pool.get("generation")) or 0,
        "slice_count": optional_int(pool.get("resourceSliceCount")) or 1,
        "devices": [d for d in devices if d is not None],
    }


@dataclass(frozen=True)
class Pools:
    """The slices of each pool's newest generation, and the pools whose newest generation is incomplete."""

    slices: list[dict[str, Any]]
    incomplete: list[str]


def current_pools(slices: Iterable[Mapping[str, Any]]) -> Pools:
    """Only a pool's newest generation counts; fewer slices than it announces means it is still being written."""
    by_pool: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for item in slices:
        by_pool[(item["driver"], item["pool"])].append(item)
    current: list[dict[str, Any]] = []
    incomplete = []
    for (driver, pool), items in sorted(by_pool.items()):
        newest = max(i["generation"] for i in items)
        latest = [dict(i) for i in items if i["generation"] == newest]
        current += latest
        announced = max(i["slice_count"] for i in latest)
        if len(latest) < announced:
            incomplete.append(
                f"pool {pool} of driver {driver}: {len(latest)} of {announced} ResourceSlices of generation "
                f"{newest} published, so its devices may be counted short until the driver finishes"
            )
    return Pools(current, incomplete)


def devices_by_node(slices: Iterable[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The devices each node's slices publish (slices without a node, for network devices, left out)."""
    found: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for item in slices:
        if item["node"]:
            found[item["node"]].extend(item["devices"])
    return dict(found)


def device_key(driver: str, pool: str, device: str) -> tuple[str, str, str]:
    return (driver, pool, device)


def pool_nodes(slices: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], str]:
    """(driver, pool) -> the node its slices name."""
    return {(s["driver"], s["pool"]): s["node"] for s in slices if s["node"]}


# --- DeviceTaintRules --------------------------------------------------------------------------------


def project_taint_rule(item: object) -> dict[str, Any] | None:
    """A DeviceTaintRule: the devices its selector picks (driver, pool, device name; unset picks any)
    and its one taint. A rule without a selector picks no device, so it is left out."""
    metadata = as_mapping(as_mapping(item).get("metadata"))
    spec = as_mapping(as_mapping(item).get("spec"))
    name, selector, taint = metadata.get("name"), spec.get("deviceSelector"), as_mapping(spec.get("taint"))
    if (
        not isinstance(name, str)
        or not name
        or not isinstance(selector, Mapping)
        or not isinstance(taint.get("key"), str)
    ):
        return None
    picks = {key: as_text(selector.get(key)) or None for key in ("driver", "pool", "device")}
    return {
        "name": name,
        **picks,
        "taint": {"key": taint["key"], "value": taint.get("value"), "effect": taint.get("effect")},
    }


def keeps_pods_away(device: Mapping[str, Any]) -> bool:
    """A projected device with a taint the scheduler honours (effect None only reports)."""
    return any(t["effect"] in TAINT_EFFECTS_THAT_KEEP_PODS_AWAY for t in device["taints"])


def taint_text(taint: Mapping[str, Any]) -> str:
    """`key=value:effect`, or `key:effect` for a taint without value, as kubectl writes taints."""
    value = taint.get("value")
    return f"{taint['key']}{'=' + str(value) if value else ''}:{taint.get('effect') or ''}"


def tainted_device_text(device: Mapping[str, Any]) -> str:
    """A device and its taints, as `gpu-3 (key=value:NoExecute)`."""
    return f"{device['name']} ({', '.join(map(taint_text, device['taints']))})"


def rule_selects(rule: Mapping[str, Any], device: Mapping[str, Any]) -> bool:
    return all(
        rule[key] in (None, device[field])
        for key, field in (("driver", "driver"), ("pool", "pool"), ("device", "name"))
    )


def with_rule_taints(slices: Sequence[Mapping[str, Any]], rules: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The slices with the taint of every rule that picks a device added to that device's own, as the
    scheduler applies them: a rule's taint counts the same as one the driver wrote into the slice."""
    if not rules:
        return [dict(s) for s in slices]
    tainted = []
    for item in slices:
        devices = []
        for device in item["devices"]:
            added = [dict(rule["taint"]) for rule in rules if rule_selects(rule, device)]
            devices.append({**device, "taints": [*device["taints"], *added]} if added else device)
        tainted.append({**item, "devices": devices})
    return tainted


# --- the model of a node, from its devices ---------------------------------------------------------


def device_model(device: Mapping[str, Any]) -> str | None:
    """The product name as GPU Feature Discovery writes it (spaces as `-`), with `-MIG-<profile>` for MIG."""
    product = (device.get("product") or "").strip()
    if not product:
        return None
    model = product.replace(" ", "-")
    if device.get("type") == DEVICE_TYPE_MIG and device.get("profile"):
        model += f"-MIG-{device['profile']}"
    return model


def model_from_devices(devices: Sequence[Mapping[str, Any]]) -> ModelDetection:
    """The model a node's DRA devices name: the most common, in GFD's spelling.

    MIG devices of one profile only name the MIG model (as GFD's single strategy does), so that
    selecting on it never sends a pod that wants whole GPUs to MIG slices.
    """
    models = Counter(m for m in map(device_model, devices) if m)
    if not models:
        return ModelDetection(None, None, None)
    model = sorted(models.items(), key=lambda pair: (-pair[1], pair[0]))[0][0]
    profiles = {d.get("profile") for d in devices if d.get("type") == DEVICE_TYPE_MIG}
    mig_profile = next(iter(profiles)) if len(profiles) == 1 and "-MIG-" in model else None
    return ModelDetection(model, MODEL_SOURCE, sanitize_label_value(model) or None, mig_profile)


# --- ResourceClaims ----------------------------------------------------------------------------------


def _node_of_allocation(allocation: Mapping[str, Any]) -> str | None:
    """The node an allocation is pinned to (matchFields metadata.name In [node])."""
    terms = as_list(as_mapping(allocation.get("nodeSelector")).get("nodeSelectorTerms"))
    for term in map(as_mapping, terms):
        for expression in map(as_mapping, as_list(term.get("matchFields"))):
            values = as_list(expression.get("values"))
            if expression.get("key") == "metadata.name" and expression.get("operator") == "In" and len(values) == 1:
                return values[0] if isinstance(values[0], str) else None
    return None


def request_classes(spec: Mapping[str, Any]) -> list[str]:
    """The DeviceClasses a claim spec's requests name (v1 `exactly` and `firstAvailable`, v1beta1 inline)."""
    names = []
    for request in map(as_mapping, as_list(as_mapping(spec.get("devices")).get("requests"))):
        candidates = [
            as_mapping(request.get("exactly")),
            request,
            *map(as_mapping, as_list(request.get("firstAvailable"))),
        ]
        names += [c["deviceClassName"] for c in candidates if isinstance(c.get("deviceClassName"), str)]
    return list(dict.fromkeys(names))


def request_counts(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per request of a claim spec: its DeviceClass, how many devices (ExactCount, 1 by default) and
    whether it asks for all the class's devices (allocationMode All). Of a ``firstAvailable`` list, the
    first alternative."""
    found = []
    for request in map(as_mapping, as_list(as_mapping(spec.get("devices")).get("requests"))):
        alternatives = as_list(request.get("firstAvailable"))
        chosen = as_mapping(request.get("exactly")) or (as_mapping(alternatives[0]) if alternatives else request)
        device_class = chosen.get("deviceClassName")
        if isinstance(device_class, str):
            count = optional_int(chosen.get("count"))
            found.append(
                {
                    "class": device_class,
                    "count": count if count and count > 0 else 1,
                    "all": chosen.get("allocationMode") == "All",
                }
            )
    return found


def admin_access_requests(spec: Mapping[str, Any], path: str) -> list[tuple[str, str]]:
    """(request name, JSON path) of each request of a claim spec that asks for admin access."""
    found = []
    for index, request in enumerate(map(as_mapping, as_list(as_mapping(spec.get("devices")).get("requests")))):
        base = f"{path}.devices.requests[{index}]"
        exactly = as_mapping(request.get("exactly"))
        if exactly.get("adminAccess") is True:
            found.append((as_text(request.get("name")), f"{base}.exactly.adminAccess"))
        elif request.get("adminAccess") is True:
            found.append((as_text(request.get("name")), f"{base}.adminAccess"))
    return found


def project_claim(item: object) -> dict[str, Any] | None:
    """The fields of a ResourceClaim the facts need: what it asks for, what it got, who holds it."""
    metadata = as_mapping(as_mapping(item).get("metadata"))
    spec = as_mapping(as_mapping(item).get("spec"))
    status = as_mapping(as_mapping(item).get("status"))
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        return None
    allocation = as_mapping(status.get("allocation"))
    results = []
    for result in map(as_mapping, as_list(as_mapping(allocation.get("devices")).get("results"))):
        driver, pool, device = result.get("driver"), result.get("pool"), result.get("device")
        if isinstance(driver, str) and isinstance(pool, str) and isinstance(device, str):
            results.append(
                {"driver": driver, "pool": pool, "device": device, "admin": result.get("adminAccess") is True}
            )
    annotations = string_map(metadata.get("annotations"))
    return {
        "namespace": as_text(metadata.get("namespace")),
        "name": name,
        "classes": request_classes(spec),
        "requests": request_counts(spec),
        "allocated": bool(allocation),
        "results": results,
        "node": _node_of_allocation(allocation),
        "reserved_for": [
            as_text(as_mapping(r).get("name"))
            for r in as_list(status.get("reservedFor"))
            if as_mapping(r).get("resource") == "pods"
        ],
        "extended_resource": annotations.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) == "true",
    }


def claims_by_device(claims: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, str], list[Mapping[str, Any]]]:
    """The claims that hold each device. Results with admin access do not hold the device."""
    holders: dict[tuple[str, str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for claim in claims:
        for result in claim["results"]:
            if not result["admin"]:
                holders[device_key(result["driver"], result["pool"], result["device"])].append(claim)
    return dict(holders)


# --- DeviceClasses -----------------------------------------------------------------------------------


def project_device_class(item: object) -> dict[str, Any] | None:
    metadata = as_mapping(as_mapping(item).get("metadata"))
    spec = as_mapping(as_mapping(item).get("spec"))
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        return None
    selectors = [as_mapping(as_mapping(s).get("cel")).get("expression") for s in as_list(spec.get("selectors"))]
    extended = spec.get("extendedResourceName")
    return {
        "name": name,
        "extended_resource": extended if isinstance(extended, str) and extended else None,
        "selectors": [s for s in selectors if isinstance(s, str)],
    }


@dataclass(frozen=True)
class CelTerms:
    """What a selector expression says of the driver and the attributes; `exact` when nothing else."""

    driver: str | None = None
    attributes: dict[tuple[str, str], str] = field(default_factory=dict)
    exact: bool = True


def cel_terms(expression: str) -> CelTerms:
    """Read the conjunctions of `device.driver == '...'` and `device.attributes['...'].x == '...'`
    that the driver's classes use; anything else makes the reading inexact."""
    driver = None
    attributes: dict[tuple[str, str], str] = {}
    exact = not _CEL_OTHER_OPERATORS.search(expression)
    for part in (p.strip().strip("()").strip() for p in expression.split("&&")):
        driver_match = _CEL_DRIVER.match(part)
        attribute_match = _CEL_ATTRIBUTE.match(part)
        if driver_match:
            driver = driver_match[1]
        elif attribute_match:
            attributes[(attribute_match[1], attribute_match[2])] = attribute_match[3]
        else:
            exact = False
    return CelTerms(driver, attributes, exact)


def class_selects(device_class: Mapping[str, Any], device: Mapping[str, Any]) -> bool:
    """Whether a DeviceClass selects a device, as far as its selectors can be read here.

    Every selector must hold. A selector read exactly is evaluated; one that is not is taken to
    select every device of the driver it names, and nothing when it names none.
    """
    for expression in device_class["selectors"]:
        terms = cel_terms(expression)
        if terms.driver is None or terms.driver != device["driver"]:
            return False
        if not terms.exact:
            continue
        for (domain, name), value in terms.attributes.items():
            if domain != device["driver"] or device["attributes"].get(name) != value:
                return False
    return bool(device_class["selectors"])


def is_gpu_class(device_class: Mapping[str, Any], drivers: frozenset[str] = GPU_DRIVERS) -> bool:
    """A class of the GPU driver's chart, or one whose selectors name a GPU driver."""
    if device_class["name"] in CHART_DEVICE_CLASSES:
        return True
    return any(cel_terms(e).driver in drivers for e in device_class["selectors"])


# --- GPUs served by the device plugin and a DRA driver at once --------------------------------------

# What NVIDIA's DRA driver says of running its GPU kubelet plugin beside the device plugin: its Helm
# chart refuses resources.gpus.enabled=true unless gpuResourcesEnabledOverride=true, because
# "this DRA driver cannot be deployed alongside the standard GPU device plugin on the same node"
# (github.com/NVIDIA/k8s-dra-driver-gpu @ 22407113785e78c7763b4637689a201eb39c6199,
# deployments/helm/dra-driver-nvidia-gpu/templates/validation.yaml). The scheduler counts the node's
# extended resource and the slices' devices apart, so it admits pods of both onto the same GPUs.

# The case of the finding where a DeviceClass also maps the resource to the node's DRA devices.
DUAL_STACK_MAPPED = "mapped"


@dataclass(frozen=True)
class DevicePluginSide:
    """What the device plugin serves on one node: the node's allocatable, which of its resources are
    GPUs, and the pods that hold them (`namespace/name` -> resource -> count)."""

    allocatable: Mapping[str, int]
    is_gpu_resource: Callable[[str], bool]
    pods: Mapping[str, Mapping[str, int]] = field(default_factory=dict)


def claim_holders(
    devices: Sequence[Mapping[str, Any]], holders: Mapping[tuple[str, str, str], Sequence[Mapping[str, Any]]]
) -> tuple[list[str], int]:
    """The pods the claims on these devices are reserved for (`namespace/name`), and how many of the
    devices are held."""
    pods: set[str] = set()
    held = 0
    for device in devices:
        claims = holders.get(device_key(device["driver"], device["pool"], device["name"]), [])
        held += bool(claims)
        for claim in claims:
            pods.update(f"{claim['namespace']}/{pod}" for pod in claim["reserved_for"] if pod)
    return sorted(pods), held


def dual_stack(
    plugin: DevicePluginSide,
    devices: Sequence[Mapping[str, Any]],
    classes: Iterable[Mapping[str, Any]],
    holders: Mapping[tuple[str, str, str], Sequence[Mapping[str, Any]]],
) -> list[dict[str, Any]]:
    """Per extended resource the device plugin advertises on a node that a GPU driver's ResourceSlices
    also publish devices for: the same GPUs offered twice, whether or not a DeviceClass maps the
    resource to those devices (`device_class` names the classes that do, else None).

    `over_committed` when pods hold GPUs both ways on the node right now: a pod holding the resource
    and a pod whose claim is allocated on the node's devices; neither side knows of the other's.
    """
    gpu_devices = [d for d in devices if d["driver"] in GPU_DRIVERS]
    if not gpu_devices:
        return []
    class_list = list(classes)
    found = []
    for resource, amount in sorted(plugin.allocatable.items()):
        if amount <= 0:
            continue
        mapping = [c for c in class_list if c["extended_resource"] == resource]
        served = [d for d in gpu_devices if any(class_selects(c, d) for c in mapping)]
        if not served and not plugin.is_gpu_resource(resource):
            continue
        mapped = sorted(c["name"] for c in mapping if any(class_selects(c, d) for d in served))
        served = served or gpu_devices
        claim_pods, claimed = claim_holders(served, holders)
        plugin_pods = sorted(p for p, held in plugin.pods.items() if held.get(resource, 0) > 0)
        found.append(
            {
                "resource": resource,
                "allocatable": amount,
                "driver": ", ".join(sorted({d["driver"] for d in served})),
                "devices": len(served),
                "device_class": ", ".join(mapped) or None,
                "over_committed": bool(plugin_pods and claim_pods),
                "plugin_pods": plugin_pods,
                "plugin_gpus": sum(plugin.pods[p].get(resource, 0) for p in plugin_pods),
                "claim_pods": claim_pods,
                "claimed_devices": claimed,
            }
        )
    return found


# --- everything read, for the checks -----------------------------------------------------------------


@dataclass
class DraObjects:
    """The projected DeviceClasses, GPU ResourceSlices and ResourceClaims of one run.

    `unavailable` says why they could not be read (the API is not served, or the reader may not
    list it); the checks then judge what they can without them.
    """

    classes: list[dict[str, Any]] = field(default_factory=list)
    slices: list[dict[str, Any]] = field(default_factory=list)
    claims: list[dict[str, Any]] = field(default_factory=list)
    unavailable: str | None = None
    taint_rules: list[dict[str, Any]] = field(default_factory=list)
    # Why DeviceTaintRules could not be read (not served, or not allowed): the rest still counts.
    taint_rules_unavailable: str | None = None

    @property
    def available(self) -> bool:
        return self.unavailable is None


COUNTED_WITHOUT_DRA = "GPUs from DRA drivers are not counted; the facts come from the device plugin alone"
GRANT_READER = "grant list on deviceclasses, resourceslices and resourceclaims (the kubegpu-reader role in rbac/ does)"


def unavailable_note(
    status: int | None, resource: str, consequence: str = COUNTED_WITHOUT_DRA, grant: str = GRANT_READER
) -> str | None:
    """Why DRA objects could not be read, for a 404 or a 403, and what follows; None for any other failure."""
    if status == 404:
        return f"this cluster does not serve {RESOURCE_API_VERSION} ({resource}: 404): {consequence}"
    if status == 403:
        return f'not allowed to list "{resource}" (apiGroup "{RESOURCE_API_GROUP}"): {consequence}; {grant}'
    return None


def taint_rules_unavailable_note(status: int | None) -> str | None:
    """Why DeviceTaintRules could not be listed, for a 404 or a 403; None for any other failure."""
    consequence = "devices count as tainted only by the taints their ResourceSlices carry"
    if status == 404:
        return f"this cluster does not serve {DEVICE_TAINT_RULES} in {RESOURCE_API_VERSION}: {consequence}"
    if status == 403:
        return unavailable_note(
            status,
            DEVICE_TAINT_RULES,
            consequence,
            f"grant list on {DEVICE_TAINT_RULES} (the kubegpu-reader role in rbac/ does)",
        )
    return None
