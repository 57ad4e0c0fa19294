# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rules that find GPU use the scheduler does not see, over plain pod-spec dicts.

The environment is resolved as the kubelet builds it (envFrom with prefixes first, then env,
the last duplicate winning, `$(VAR)` expanded) and read as the NVIDIA container toolkit reads
it (split on commas and trimmed; void or empty select nothing, none selects no GPU, all or ids
select GPUs). Quantity rules repeat what the API server rejects, in its own words.
"""

from __future__ import annotations

import base64
import binascii
import posixpath
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from decimal import ROUND_CEILING, Decimal
from fnmatch import fnmatchcase
from typing import Any, Protocol

from ansible_collections.kubegpu.scheduling.plugins.module_utils.plain import as_list, as_mapping, as_text
from ansible_collections.kubegpu.scheduling.plugins.module_utils.quantity import (
    QuantityError,
    is_whole,
    parse_quantity,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.resources import gpu_resource_matcher
from ansible_collections.kubegpu.scheduling.plugins.module_utils.workloads import (
    ContainerSite,
    NotChecked,
    ObjectRef,
    PodSpecSite,
    iter_containers,
    join_path,
    key_path,
    walk_document,
)

ERROR = "error"
WARNING = "warning"
SEVERITIES = (ERROR, WARNING)
DEFAULT_ALLOW_ANNOTATION = "kubegpu.io/allow-bypass"

VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"
DEVICE_VARIABLES = {
    VISIBLE_DEVICES: "selects",
    "NVIDIA_MIG_CONFIG_DEVICES": "grants MIG configuration of",
    "NVIDIA_MIG_MONITOR_DEVICES": "grants MIG monitoring of",
}
CUDA_VERSION = "CUDA_VERSION"
REQUIRE_CUDA = "NVIDIA_REQUIRE_CUDA"
# Longest expanded env value kept; `$(VAR)` chains can otherwise grow exponentially.
MAX_EXPANDED_LENGTH = 64 * 1024

DEVICE_LIST_MOUNT_ROOTS = ("/var/run/nvidia-container-devices", "/run/nvidia-container-devices")
_GPU_HOST_DIRS = ("/dev/char", "/run/nvidia", "/var/run/nvidia", "/home/kubernetes/bin/nvidia", "/usr/local/nvidia")
_DRIVER_FILE_PREFIXES = ("libnvidia", "libcuda", "nvidia-smi")
_DEVICE_ANNOTATION_PREFIXES = ("cdi.k8s.io/", "devices.nri.io/")
_DEVICE_ANNOTATION_KEYS = ("io.kubernetes.cri-o.Devices",)

_GPU_WORDS = re.compile(r"cuda|nvidia|nvcc|dcgm|tensorrt|triton|gpu", re.IGNORECASE)
_GPU_NODE_LABEL = re.compile(r"nvidia|gpu|accelerator|pci-(?:03\d\d_)?10de", re.IGNORECASE)


@dataclass(frozen=True)
class Rule:
    id: str
    name: str
    severity: str
    title: str
    remedy: str
    allowable: bool = True


RULES: dict[str, Rule] = {
    rule.id: rule
    for rule in (
        Rule(
            "KGPU101",
            "visible-devices-without-gpu",
            ERROR,
            "NVIDIA_VISIBLE_DEVICES (or a MIG device variable) gives GPUs to a container that requests none",
            "Remove the variable and request GPUs in resources.limits (for example nvidia.com/gpu: 1); "
            "to keep a container away from GPUs set NVIDIA_VISIBLE_DEVICES=void.",
        ),
        Rule(
            "KGPU102",
            "visible-devices-overrides-plugin",
            ERROR,
            "NVIDIA_VISIBLE_DEVICES (or a MIG device variable) overrides the GPUs the device plugin assigned",
            "Remove the variable from the container: the device plugin sets it to the GPUs the scheduler counted.",
        ),
        Rule(
            "KGPU103",
            "visible-devices-unknown",
            WARNING,
            "NVIDIA_VISIBLE_DEVICES (or a MIG device variable) may be set to a value that cannot be known here",
            "Set the variable from a literal value, or not at all; check the referenced source.",
        ),
        Rule(
            "KGPU201",
            "gpu-device-host-path",
            ERROR,
            "A hostPath volume of GPU device nodes or driver files is mounted into a container",
            "Remove the hostPath volume and request GPUs in resources.limits; the NVIDIA runtime injects "
            "devices and driver files for the GPUs the scheduler assigned.",
        ),
        Rule(
            "KGPU202",
            "device-list-volume-mount",
            ERROR,
            "A volume is mounted under /var/run/nvidia-container-devices, where a hardened NVIDIA runtime reads "
            "device requests",
            "Remove the mount; only the device plugin may request devices this way.",
        ),
        Rule(
            "KGPU301",
            "privileged-gpu-container",
            ERROR,
            "A privileged container (privileged, SYS_ADMIN or ALL capabilities) shows GPU intent",
            "Drop privileged and the SYS_ADMIN/ALL capabilities and request GPUs in resources.limits. "
            "If the container must be privileged (a device plugin or driver), add the allow annotation with a reason.",
        ),
        Rule(
            "KGPU302",
            "privileged-container",
            WARNING,
            "A privileged container (privileged, SYS_ADMIN or ALL capabilities) can reach every GPU of its node",
            "Drop privileged if it is not needed, or keep the pod off GPU nodes; add the allow annotation "
            "with a reason for system components.",
        ),
        Rule(
            "KGPU401",
            "gpu-request-without-limit",
            ERROR,
            "A GPU resource is requested without a limit; the API server rejects it",
            "Set the GPU in resources.limits (requests may be omitted: they default to the limits).",
            False,
        ),
        Rule(
            "KGPU402",
            "gpu-request-not-equal-limit",
            ERROR,
            "A GPU request differs from its limit; the API server rejects it",
            "Set the GPU only in resources.limits, or make the request equal to the limit.",
            False,
        ),
        Rule(
            "KGPU403",
            "gpu-quantity-not-whole",
            ERROR,
            "A GPU quantity is not a whole number",
            "Request whole GPUs (1, 2, ...); for a share of a GPU use a shared-GPU or MIG resource.",
            False,
        ),
        Rule(
            "KGPU404",
            "gpu-quantity-negative",
            ERROR,
            "A GPU quantity is negative; the API server rejects it",
            "Use a quantity of 0 or more.",
            False,
        ),
        Rule(
            "KGPU405",
            "gpu-quantity-malformed",
            ERROR,
            "A GPU quantity is not a Kubernetes quantity; the API server rejects it",
            "Write the quantity as a whole number such as 1.",
            False,
        ),
        Rule(
            "KGPU406",
            "pod-level-gpu-resources",
            ERROR,
            "A GPU resource is set in pod-level spec.resources; the API server rejects it",
            "Move the GPU to the resources.limits of the container that uses it.",
            False,
        ),
        Rule(
            "KGPU407",
            "ephemeral-container-gpu-resources",
            ERROR,
            "An ephemeral container sets GPU resources; the API server rejects it",
            "Remove resources from the ephemeral container.",
            False,
        ),
        Rule(
            "KGPU501",
            "image-visible-devices-all",
            WARNING,
            "The image sets NVIDIA_VISIBLE_DEVICES=all (or is a legacy CUDA image) and the container requests no GPU",
            "Set NVIDIA_VISIBLE_DEVICES=void in the container env, or request the GPU in resources.limits.",
        ),
        Rule(
            "KGPU601",
            "nvidia-runtime-class-without-gpu",
            WARNING,
            "The pod uses an NVIDIA runtime class but requests no GPU",
            "Request GPUs in resources.limits, or remove runtimeClassName.",
        ),
        Rule(
            "KGPU602",
            "device-annotation-without-gpu",
            WARNING,
            "The pod carries device-injection annotations (CDI, NRI, CRI-O) but requests no GPU",
            "Remove the annotation and request GPUs in resources.limits.",
        ),
        Rule(
            "KGPU901",
            "allow-annotation-without-reason",
            WARNING,
            "The allow annotation has no reason, so it is not honoured",
            'Give the reason as the annotation value, for example: "NVIDIA device plugin".',
        ),
    )
}


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: str
    ref: ObjectRef
    container: str | None
    path: str
    message: str
    remedy: str
    line: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "name": RULES[self.rule].name if self.rule in RULES else self.rule,
            "severity": self.severity,
            "kind": self.ref.kind,
            "namespace": self.ref.namespace,
            "object_name": self.ref.name,
            "container": self.container,
            "path": self.path,
            "message": self.message,
            "remedy": self.remedy,
            "source": self.ref.source,
            "document": self.ref.document,
            "line": self.line if self.line is not None else self.ref.line,
        }


@dataclass(frozen=True)
class Allowed:
    finding: Finding
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {**self.finding.to_dict(), "allowed_reason": self.reason}


# ---------------------------------------------------------------------------------------------
# Where env values come from


@dataclass(frozen=True)
class SourceData:
    """The keys of a ConfigMap or Secret. A value of None is present but unreadable."""

    values: Mapping[str, str | None]
    where: str
    secret: bool = False
    absent: bool = False  # known not to exist (the cluster said 404)


class EnvSources(Protocol):
    def config_map(self, namespace: str, name: str) -> SourceData | None: ...

    def secret(self, namespace: str, name: str) -> SourceData | None: ...


class NoEnvSources:
    def config_map(self, namespace: str, name: str) -> SourceData | None:
        return None

    def secret(self, namespace: str, name: str) -> SourceData | None:
        return None


def config_map_values(obj: Mapping[str, Any]) -> dict[str, str | None]:
    # envFrom reads `data` only; a non-string value would be refused by the API server.
    return {
        k: (v if isinstance(v, str) else None) for k, v in as_mapping(obj.get("data")).items() if isinstance(k, str)
    }


def secret_values(obj: Mapping[str, Any]) -> dict[str, str | None]:
    values: dict[str, str | None] = {}
    for key, raw in as_mapping(obj.get("data")).items():
        if isinstance(key, str):
            values[key] = decode_secret_value(raw)
    for key, raw in as_mapping(obj.get("stringData")).items():  # the API server merges stringData over data
        if isinstance(key, str):
            values[key] = raw if isinstance(raw, str) else None
    return values


def decode_secret_value(raw: Any) -> str | None:
    if not isinstance(raw, str) or len(raw) > MAX_EXPANDED_LENGTH * 2:
        return None
    try:
        return base64.b64decode(raw, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return None


class DocumentEnvSources:
    """ConfigMaps and Secrets found in the input documents, by namespace and name.

    An object without a namespace is applied to whatever namespace the command names, so it
    matches any namespace when no object of that name has the exact namespace.
    """

    def __init__(self) -> None:
        self._objects: dict[tuple[str, str, str], SourceData] = {}

    def add(self, obj: Mapping[str, Any], where: str) -> None:
        kind = obj.get("kind")
        if kind not in ("ConfigMap", "Secret") or as_text(obj.get("apiVersion")) not in ("v1", ""):
            return
        metadata = as_mapping(obj.get("metadata"))
        name = as_text(metadata.get("name"))
        if not name:
            return
        namespace = as_text(metadata.get("namespace"))
        if kind == "ConfigMap":
            data = SourceData(config_map_values(obj), f"ConfigMap {name} ({where})")
        else:
            data = SourceData(secret_values(obj), f"Secret {name} ({where})", secret=True)
        self._objects[(str(kind), namespace, name)] = data

    def _lookup(self, kind: str, namespace: str, name: str) -> SourceData | None:
        return self._objects.get((kind, namespace, name)) or self._objects.get((kind, "", name))

    def config_map(self, namespace: str, name: str) -> SourceData | None:
        return self._lookup("ConfigMap", namespace, name)

    def secret(self, namespace: str, name: str) -> SourceData | None:
        return self._lookup("Secret", namespace, name)


class ClusterEnvSources:
    """ConfigMaps and Secrets read from the cluster on first reference, one GET each, cached.

    `client` needs a `get(path)` that raises an exception with a `status` attribute. Secret
    values are used to judge the NVIDIA variables only; they never appear in any message.
    """

    def __init__(self, client: Any) -> None:
        self._client = client
        self._cache: dict[tuple[str, str, str], SourceData | None] = {}
        self.problems: list[str] = []

    def _fetch(self, kind: str, resource: str, namespace: str, name: str) -> SourceData | None:
        key = (kind, namespace, name)
        if key not in self._cache:
            self._cache[key] = self._read(kind, resource, namespace, name)
        return self._cache[key]

    def _read(self, kind: str, resource: str, namespace: str, name: str) -> SourceData | None:
        where = f"{kind} {namespace}/{name} in the cluster"
        try:
            obj = self._client.get(f"/api/v1/namespaces/{namespace}/{resource}/{name}")
        except Exception as exc:  # noqa: BLE001 - any failure of the client's own error types means "unknown"
            if getattr(exc, "status", None) == 404:
                return SourceData({}, where, secret=kind == "Secret", absent=True)
            self.problems.append(f"could not read {where}: {getattr(exc, 'message', None) or exc}")
            return None
        if not isinstance(obj, dict):
            return None
        values = secret_values(obj) if kind == "Secret" else config_map_values(obj)
        return SourceData(values, where, secret=kind == "Secret")

    def config_map(self, namespace: str, name: str) -> SourceData | None:
        return self._fetch("ConfigMap", "configmaps", namespace, name) if namespace and name else None

    def secret(self, namespace: str, name: str) -> SourceData | None:
        return self._fetch("Secret", "secrets", namespace, name) if namespace and name else None


# ---------------------------------------------------------------------------------------------
# The container environment, as the kubelet builds it


@dataclass(frozen=True)
class EnvValue:
    value: str | None  # None: cannot be known here
    path: str  # the field that set it
    origin: str  # how it was set, in words
    secret: bool = False
    note: str = ""  # why the value is unknown

    def shown(self) -> str:
        if self.secret:
            return "a value from a Secret (not shown)"
        return f"{self.value!r}"


@dataclass
class ResolvedEnv:
    values: dict[str, EnvValue] = field(default_factory=dict)
    # envFrom sources whose keys are unknown: (prefix, marker). They may define any name with that prefix.
    opaque: list[tuple[str, EnvValue]] = field(default_factory=list)

    def lookup(self, name: str) -> EnvValue | None:
        found = self.values.get(name)
        if found is not None:
            return found
        for prefix, marker in self.opaque:
            if name.startswith(prefix):
                return marker
        return None

    def opaque_source_for(self, name: str) -> EnvValue | None:
        """An unknown envFrom source whose non-empty prefix leads to this name."""
        for prefix, marker in self.opaque:
            if prefix and name.startswith(prefix):
                return marker
        return None


def expand_references(raw: str, env: ResolvedEnv) -> tuple[str | None, list[EnvValue], str]:
    """Expand `$(VAR)` as the kubelet does: `$$` is a literal `$`, undefined references stay as written.

    Returns the value (None when a reference is unknown or the result is too long), the values
    it used, and a note when the value is unknown.
    """
    out: list[str] = []
    used: list[EnvValue] = []
    size = 0
    checkpoint = 0
    length = len(raw)
    cursor = raw.find("$")
    while cursor != -1 and cursor + 1 < length:
        out.append(raw[checkpoint:cursor])
        size += cursor - checkpoint
        following = raw[cursor + 1]
        if following == "(":
            close = raw.find(")", cursor + 2)
            if close == -1:
                piece, advance = "$(", 1
            else:
                name = raw[cursor + 2 : close]
                ref = env.lookup(name)
                advance = close - cursor
                if ref is None:
                    piece = raw[cursor : close + 1]
                elif ref.value is None:
                    why = ref.note if ref.note.startswith("it refers to") else f"it refers to $({name}): {ref.note}"
                    return None, [*used, ref], why
                else:
                    used.append(ref)
                    piece = ref.value
        else:
            piece, advance = ("$" if following == "$" else "$" + following), 1
        out.append(piece)
        size += len(piece)
        if size > MAX_EXPANDED_LENGTH:
            return None, used, f"its expansion is longer than {MAX_EXPANDED_LENGTH} characters"
        checkpoint = cursor + advance + 1
        cursor = raw.find("$", checkpoint)
    out.append(raw[checkpoint:])
    return "".join(out), used, ""


_RELEVANT_PREFIXES = ("NVIDIA_", "CUDA_")


def env_may_matter(container: Mapping[str, Any]) -> bool:
    """Whether the env can hold an NVIDIA or CUDA variable. Names are never expanded, so a container
    whose env names none of them and that has no envFrom needs no resolution at all."""
    if container.get("envFrom"):
        return True
    env = container.get("env")
    if not isinstance(env, list):
        return False
    for item in env:
        name = item.get("name") if isinstance(item, dict) else None
        if isinstance(name, str) and name.startswith(_RELEVANT_PREFIXES):
            return True
    return False


def resolve_env(
    container: Mapping[str, Any],
    container_path: str,
    namespace: str,
    sources: EnvSources,
    pod_metadata: Mapping[str, Any],
) -> ResolvedEnv:
    env = ResolvedEnv()
    env_from = container.get("envFrom")
    if isinstance(env_from, list):
        for index, item in enumerate(env_from):
            if isinstance(item, dict):
                _apply_env_from(env, item, f"{container_path}.envFrom[{index}]", namespace, sources)
    env_list = container.get("env")
    if isinstance(env_list, list):
        for index, item in enumerate(env_list):
            if isinstance(item, dict):
                name = item.get("name")
                if isinstance(name, str) and name:
                    value = _env_var_value(
                        item, f"{container_path}.env[{index}]", env, namespace, sources, pod_metadata
                    )
                    if value is not None:
                        env.values[name] = value
    return env


def _apply_env_from(env: ResolvedEnv, item: Mapping[str, Any], path: str, namespace: str, sources: EnvSources) -> None:
    prefix = as_text(item.get("prefix"))
    for ref_key, kind in (("configMapRef", "ConfigMap"), ("secretRef", "Secret")):
        ref = item.get(ref_key)
        if not isinstance(ref, dict):
            continue
        name = as_text(ref.get("name"))
        ref_path = f"{path}.{ref_key}"
        data = sources.secret(namespace, name) if kind == "Secret" else sources.config_map(namespace, name)
        through = f"{path.rsplit('.', 1)[-1]}" + (f" with prefix {prefix!r}" if prefix else "")
        if data is None:
            marker = EnvValue(
                None,
                ref_path,
                f"{kind} {name or '(no name)'} through {through}",
                secret=kind == "Secret",
                note=f"{kind} {name or '(no name)'} is not available here",
            )
            env.opaque.append((prefix, marker))
            continue
        if data.absent:
            continue  # optional, or the pod cannot start: either way it sets nothing
        for key, value in data.values.items():
            env.values[prefix + key] = EnvValue(
                value,
                ref_path,
                f"key {key} of {data.where} through {through}",
                secret=data.secret,
                note="" if value is not None else "unreadable value",
            )


def _env_var_value(
    item: Mapping[str, Any],
    path: str,
    env: ResolvedEnv,
    namespace: str,
    sources: EnvSources,
    pod_metadata: Mapping[str, Any],
) -> EnvValue | None:
    raw = item.get("value")
    label = f"{path.rsplit('.', 1)[-1]}.value"
    if isinstance(raw, str) and raw:
        if "$" not in raw:
            return EnvValue(raw, f"{path}.value", label)
        value, used, note = expand_references(raw, env)
        secret = any(u.secret for u in used)
        return EnvValue(value, f"{path}.value", f"{label} {raw!r}, expanded", secret=secret, note=note)
    value_from = item.get("valueFrom")
    if isinstance(value_from, dict):
        return _value_from(value_from, f"{path}.valueFrom", namespace, sources, pod_metadata)
    if raw is None or raw == "":
        return EnvValue("", f"{path}.value", label)
    return EnvValue(None, f"{path}.value", label, note=f"the value {raw!r} is not a string")


def _value_from(
    value_from: Mapping[str, Any], path: str, namespace: str, sources: EnvSources, pod_metadata: Mapping[str, Any]
) -> EnvValue | None:
    for ref_key, kind in (("configMapKeyRef", "ConfigMap"), ("secretKeyRef", "Secret")):
        ref = value_from.get(ref_key)
        if not isinstance(ref, dict):
            continue
        name, key = as_text(ref.get("name")), as_text(ref.get("key"))
        ref_path = f"{path}.{ref_key}"
        data = sources.secret(namespace, name) if kind == "Secret" else sources.config_map(namespace, name)
        if data is None:
            return EnvValue(
                None,
                ref_path,
                f"key {key} of {kind} {name}",
                secret=kind == "Secret",
                note=f"{kind} {name or '(no name)'} is not available here",
            )
        if data.absent or key not in data.values:
            if ref.get("optional") is True or data.absent:
                return None  # the kubelet skips an optional reference that is missing
            return EnvValue(
                None, ref_path, f"key {key} of {data.where}", secret=data.secret, note=f"{data.where} has no key {key}"
            )
        return EnvValue(data.values[key], ref_path, f"key {key} of {data.where}", secret=data.secret)
    field_ref = value_from.get("fieldRef")
    if isinstance(field_ref, dict):
        return _field_ref_value(as_text(field_ref.get("fieldPath")), f"{path}.fieldRef", pod_metadata)
    return EnvValue(
        None, path, "valueFrom", note="resourceFieldRef and other valueFrom sources are known only at run time"
    )


_METADATA_MAP_FIELD = re.compile(r"^metadata\.(labels|annotations)\['([^']*)'\]$")


def _field_ref_value(field_path: str, path: str, pod_metadata: Mapping[str, Any]) -> EnvValue:
    match = _METADATA_MAP_FIELD.match(field_path)
    if match:
        values = as_mapping(pod_metadata.get(match[1]))
        value = values.get(match[2], "")
        if isinstance(value, str):
            return EnvValue(value, path, f"the pod's {field_path}")
    return EnvValue(
        None, path, f"the pod's {field_path or 'field'}", note=f"{field_path or 'the field'} is known only at run time"
    )


def device_selection(value: str) -> str:
    """void, none, all or devices: how the NVIDIA toolkit reads a device-list variable."""
    entries = [entry.strip() for entry in value.split(",")]
    entries = [entry for entry in entries if entry]
    if not entries or "void" in entries:
        return "void"
    if "none" in entries:
        return "none"
    if "all" in entries:
        return "all"
    return "devices"


def selects_gpus(value: str) -> bool:
    return device_selection(value) in ("all", "devices")


# ---------------------------------------------------------------------------------------------
# Quantities, as the API server validates them

_SI_SUFFIXES = ((18, "E"), (15, "P"), (12, "T"), (9, "G"), (6, "M"), (3, "k"), (0, ""), (-3, "m"), (-6, "u"), (-9, "n"))
_QUANTITY_PATTERN_MESSAGE = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)


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
        message = f"{field_path}: Invalid value: {raw!r}: {_QUANTITY_PATTERN_MESSAGE}"
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
                f"{resource} quantity {raw!r} is not a whole number of GPUs. The API server admits it (its "
                "integer check rounds milli-units up) and stores it as "
                f"{int(value.to_integral_value(rounding=ROUND_CEILING))}."
            )
        else:
            message = f'{field_path}: Invalid value: "{format_quantity(value)}": must be an integer'
        return value, [QuantityIssue("KGPU403", path, message)]
    return value, []


# ---------------------------------------------------------------------------------------------
# Images


@dataclass(frozen=True)
class ImageFamily:
    pattern: re.Pattern[str]
    description: str
    tag_pattern: re.Pattern[str] | None = None


_CUDA_ENV = {VISIBLE_DEVICES: "all"}
KNOWN_IMAGE_FAMILIES = (
    ImageFamily(re.compile(r"^(?:.+/)?nvidia/cuda$"), "the official CUDA image"),
    ImageFamily(re.compile(r"^nvcr\.io/nvidia/"), "an NVIDIA NGC image, built on the CUDA base image"),
    ImageFamily(re.compile(r"^nvidia/"), "an NVIDIA image, built on the CUDA base image"),
    ImageFamily(re.compile(r"^(?:.+/)?cuda(?:[-_][^/]*)?$"), "a CUDA image"),
    ImageFamily(re.compile(r"^pytorch/pytorch$"), "the PyTorch image"),
    ImageFamily(re.compile(r"^tensorflow/tensorflow$"), "the TensorFlow GPU image", re.compile(r"gpu")),
    ImageFamily(re.compile(r"^vllm/vllm-openai$"), "the vLLM image, built on the CUDA base image"),
)


def image_repository(image: str) -> tuple[str, str]:
    """Repository (lower case, Docker Hub defaults removed) and tag of an image reference."""
    ref = image.strip().split("@", 1)[0]
    slash, colon = ref.rfind("/"), ref.rfind(":")
    repo, tag = (ref[:colon], ref[colon + 1 :]) if colon > slash else (ref, "")
    repo = repo.lower()
    for prefix in ("docker.io/", "index.docker.io/", "registry-1.docker.io/"):
        if repo.startswith(prefix):
            repo = repo[len(prefix) :]
            break
    return repo.removeprefix("library/"), tag


def known_family(image: str) -> ImageFamily | None:
    repo, tag = image_repository(image)
    for family in KNOWN_IMAGE_FAMILIES:
        if family.pattern.search(repo) and (family.tag_pattern is None or family.tag_pattern.search(tag)):
            return family
    return None


@dataclass(frozen=True)
class ImageEnv:
    env: Mapping[str, str]
    source: str


class ImageCatalogue:
    """What the image's config env holds: the user's map first (exact, then globs), then known families."""

    def __init__(self, image_env: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self._exact: dict[str, dict[str, str]] = {}
        self._globs: list[tuple[str, dict[str, str]]] = []
        for image, env in (image_env or {}).items():
            values = {str(k): str(v) for k, v in env.items()} if isinstance(env, Mapping) else {}
            if any(c in image for c in "*?["):
                self._globs.append((image, values))
            else:
                self._exact[image] = values
        self._cache: dict[str, ImageEnv | None] = {}

    def lookup(self, image: str) -> ImageEnv | None:
        if image not in self._cache:
            self._cache[image] = self._find(image)
        return self._cache[image]

    def _find(self, image: str) -> ImageEnv | None:
        if image in self._exact:
            return ImageEnv(self._exact[image], "the image_env map")
        for pattern, env in self._globs:
            if fnmatchcase(image, pattern):
                return ImageEnv(env, f"the image_env map ({pattern})")
        family = known_family(image)
        return ImageEnv(_CUDA_ENV, family.description) if family else None


# ---------------------------------------------------------------------------------------------
# Configuration and the checks of one pod spec


@dataclass(frozen=True)
class RuleConfig:
    gpu_resources: tuple[str, ...] = ()
    image_env: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    allow_annotation: str = DEFAULT_ALLOW_ANNOTATION
    skip_rules: frozenset[str] = frozenset()


def unknown_rules(rule_ids: Iterable[str]) -> list[str]:
    return sorted(r for r in rule_ids if r not in RULES)


@dataclass
class ContainerFacts:
    site: ContainerSite
    env: ResolvedEnv
    has_gpu: bool
    gpu_resources: list[str]
    image_env: ImageEnv | None


class PodChecker:
    """The rules, compiled once for a run: a cached GPU-name matcher and image catalogue."""

    def __init__(self, config: RuleConfig | None = None, sources: EnvSources | None = None) -> None:
        self.config = config or RuleConfig()
        self.sources: EnvSources = sources or NoEnvSources()
        self.images = ImageCatalogue(self.config.image_env)
        matcher = gpu_resource_matcher(self.config.gpu_resources)
        self._gpu_names: dict[str, bool] = {}
        self._matcher = matcher

    def is_gpu(self, name: str) -> bool:
        known = self._gpu_names.get(name)
        if known is None:
            known = self._gpu_names[name] = isinstance(name, str) and self._matcher(name)
        return known

    # -- one pod spec ---------------------------------------------------------------------------

    def check(self, site: PodSpecSite) -> tuple[list[Finding], list[Allowed]]:
        findings: list[Finding] = []
        emit = _Emitter(site.ref, findings)
        api_prefix = site.api_path
        containers = [self._container_facts(c, site, emit, api_prefix) for c in iter_containers(site)]
        pod_has_gpu = any(c.has_gpu for c in containers) or bool(as_list(site.spec.get("resourceClaims")))
        volumes = gpu_host_path_volumes(site.spec)
        for facts in containers:
            self._env_rules(facts, emit)
            self._image_rule(facts, emit)
            mounts = _device_mounts(facts.site, volumes, emit)
            self._privilege_rule(facts, site, mounts, emit)
        if site.pod_level:
            self._pod_level_resources(site, emit, api_prefix)
            _runtime_class_rule(site, pod_has_gpu, emit)
            _annotation_rule(site, pod_has_gpu, emit)
        return self._apply_allow(site, findings)

    def _container_facts(
        self, container: ContainerSite, site: PodSpecSite, emit: _Emitter, api_prefix: str
    ) -> ContainerFacts:
        resources = as_mapping(container.container.get("resources"))
        api_path = api_prefix + container.path[len(site.path) :] + ".resources"
        gpu_names: list[str] = []
        has_gpu = False
        if resources:
            gpu_names, has_gpu = self._resource_rules(resources, container, api_path, emit)
        c = container.container
        env = (
            resolve_env(c, container.path, site.ref.namespace, self.sources, site.pod_metadata)
            if env_may_matter(c)
            else ResolvedEnv()
        )
        image = c.get("image")
        image_env = self.images.lookup(image) if isinstance(image, str) and image else None
        return ContainerFacts(container, env, has_gpu, gpu_names, image_env)

    def _resource_rules(
        self, resources: Mapping[str, Any], container: ContainerSite, api_path: str, emit: _Emitter
    ) -> tuple[list[str], bool]:
        limits = as_mapping(resources.get("limits"))
        requests = as_mapping(resources.get("requests"))
        gpu_names = [n for n in (*limits, *requests) if self.is_gpu(n)]
        has_claims = bool(as_list(resources.get("claims")))
        if not gpu_names:
            return [], has_claims
        path = f"{container.path}.resources"
        if container.list_name == "ephemeralContainers":
            emit(container, "KGPU407", path, f"{api_path}: Forbidden: cannot be set for an Ephemeral Container")
            return gpu_names, True
        parsed_limits: dict[str, Decimal | None] = {}
        for name, raw in limits.items():
            if self.is_gpu(name):
                value, issues = quantity_issues(raw, f"{api_path}.limits", key_path(f"{path}.limits", name), name)
                parsed_limits[name] = value
                emit.issues(container, issues)
        for name, raw in requests.items():
            if not self.is_gpu(name):
                continue
            value, issues = quantity_issues(raw, f"{api_path}.requests", key_path(f"{path}.requests", name), name)
            emit.issues(container, issues)
            request_path = key_path(f"{path}.requests", name)
            if name not in limits:
                emit(
                    container,
                    "KGPU401",
                    request_path,
                    f"{api_path}.limits: Required value: Limit must be set for non overcommitable resources "
                    f"({name} is requested without a limit)",
                )
            else:
                limit = parsed_limits.get(name)
                if value is not None and limit is not None and value != limit:
                    emit(
                        container,
                        "KGPU402",
                        request_path,
                        f'{api_path}.requests: Invalid value: "{format_quantity(value)}": must be equal to {name} '
                        f"limit of {format_quantity(limit)}",
                    )
        has_gpu = has_claims or any(v is not None and v > 0 for v in parsed_limits.values())
        return gpu_names, has_gpu

    def _pod_level_resources(self, site: PodSpecSite, emit: _Emitter, api_prefix: str) -> None:
        resources = as_mapping(site.spec.get("resources"))
        for section in ("limits", "requests"):
            for name in as_mapping(resources.get(section)):
                if self.is_gpu(name):
                    emit(
                        None,
                        "KGPU406",
                        key_path(f"{site.path}.resources.{section}", name),
                        f'{api_prefix}.resources.{section}[{name}]: Unsupported value: "{name}": supported values: '
                        '"cpu", "memory"',
                    )

    def _env_rules(self, facts: ContainerFacts, emit: _Emitter) -> None:
        reported_sources: set[int] = set()
        for variable, verb in DEVICE_VARIABLES.items():
            value = facts.env.values.get(variable) or facts.env.opaque_source_for(variable)
            if value is None or id(value) in reported_sources:
                continue
            who = f"container {facts.site.name!r}"
            if value.value is None:
                reported_sources.add(id(value))  # one unknown source may stand for several variables
                emit(
                    facts.site,
                    "KGPU103",
                    value.path,
                    f"{variable} in {who} comes from {value.origin}, whose value cannot be known here "
                    f"({value.note}); if it names GPUs, the container gets them without the scheduler counting them",
                )
                continue
            selection = device_selection(value.value)
            if selection not in ("all", "devices"):
                continue
            what = "every GPU of the node" if selection == "all" else "GPUs by index or id"
            shown = f"{variable}={value.value}" if not value.secret else f"{variable} ({value.shown()})"
            if facts.has_gpu:
                emit(
                    facts.site,
                    "KGPU102",
                    value.path,
                    f"{shown} in {who} (from {value.origin}) overrides the GPUs the device plugin assigned for "
                    f"its {', '.join(facts.gpu_resources) or 'GPU'} limit: it {verb} {what}, including GPUs the "
                    "scheduler gave to other pods",
                )
            else:
                emit(
                    facts.site,
                    "KGPU101",
                    value.path,
                    f"{shown} in {who} (from {value.origin}) {verb} {what}, but the container requests no GPU: "
                    "the scheduler does not count them and places other GPU pods on the same cards",
                )

    def _image_rule(self, facts: ContainerFacts, emit: _Emitter) -> None:
        image_env = facts.image_env
        if image_env is None or facts.has_gpu or facts.env.lookup(VISIBLE_DEVICES) is not None:
            return
        image = facts.site.container.get("image")
        path = f"{facts.site.path}.image"
        baked = image_env.env.get(VISIBLE_DEVICES)
        if baked is not None:
            if selects_gpus(baked):
                emit(
                    facts.site,
                    "KGPU501",
                    path,
                    f"image {image} ({image_env.source}) sets {VISIBLE_DEVICES}={baked} and container "
                    f"{facts.site.name!r} requests no GPU and does not override it: it gets GPUs the scheduler "
                    "does not count",
                )
            return
        cuda = _merged(facts.env, image_env.env, CUDA_VERSION)
        if cuda and not _merged(facts.env, image_env.env, REQUIRE_CUDA):
            emit(
                facts.site,
                "KGPU501",
                path,
                f"image {image} ({image_env.source}) is a legacy CUDA image ({CUDA_VERSION}={cuda} without "
                f"{REQUIRE_CUDA} or {VISIBLE_DEVICES}), for which the NVIDIA runtime defaults to all GPUs; "
                f"container {facts.site.name!r} requests no GPU",
            )

    def _privilege_rule(
        self, facts: ContainerFacts, site: PodSpecSite, device_mounts: list[str], emit: _Emitter
    ) -> None:
        escalations = privilege_escalations(facts.site)
        if not escalations:
            return
        path = escalations[0][0]
        how = ", ".join(what for _path, what in escalations)
        signs = self.gpu_intent(facts, site) + device_mounts
        who = f"container {facts.site.name!r}"
        if signs:
            emit(
                facts.site,
                "KGPU301",
                path,
                f"{who} runs with {how} and shows GPU intent ({'; '.join(signs)}): a privileged container sees "
                "every /dev/nvidia* device of its node, so it can use GPUs the scheduler gave to other pods",
            )
        else:
            emit(
                facts.site,
                "KGPU302",
                path,
                f"{who} runs with {how}; it shows no sign of GPU use, but on a GPU node it can reach every GPU",
            )

    def gpu_intent(self, facts: ContainerFacts, site: PodSpecSite) -> list[str]:
        """Why a container looks like it runs GPU code, in words; empty when nothing suggests it."""
        c = facts.site.container
        signs = [f"GPU resource {name}" for name in facts.gpu_resources]
        if as_list(as_mapping(c.get("resources")).get("claims")):
            signs.append("resource claims")
        signs += [
            f"env {name}"
            for name, v in facts.env.values.items()
            if (name.startswith("NVIDIA_") or name == "CUDA_VISIBLE_DEVICES")
            and not (v.value is not None and device_selection(v.value) == "void" and name in DEVICE_VARIABLES)
        ]
        image = c.get("image")
        if isinstance(image, str) and (facts.image_env is not None or _GPU_WORDS.search(image)):
            signs.append(f"image {image}")
        command = " ".join(str(a) for a in (*as_list(c.get("command")), *as_list(c.get("args"))))
        tool = _GPU_WORDS.search(command)
        if tool:
            signs.append(f"command mentions {tool[0]}")
        return signs + pod_gpu_intent(site.spec)

    def _apply_allow(self, site: PodSpecSite, findings: list[Finding]) -> tuple[list[Finding], list[Allowed]]:
        skip = self.config.skip_rules
        if skip:
            findings = [f for f in findings if f.rule not in skip]
        key = self.config.allow_annotation
        reason, path = _allow_reason(site, key)
        if path is None:
            return findings, []
        if not reason:
            kept = findings
            if "KGPU901" not in skip:
                kept = kept + [
                    Finding(
                        "KGPU901",
                        WARNING,
                        site.ref,
                        None,
                        path,
                        f"annotation {key} is set without a reason, so the findings of this object stand",
                        RULES["KGPU901"].remedy,
                    )
                ]
            return kept, []
        allowed = [Allowed(f, reason) for f in findings if RULES[f.rule].allowable]
        return [f for f in findings if not RULES[f.rule].allowable], allowed


class _Emitter:
    """Collects findings for one object, filling in the rule's severity and remedy."""

    def __init__(self, ref: ObjectRef, sink: list[Finding]) -> None:
        self.ref = ref
        self.sink = sink

    def __call__(self, container: ContainerSite | None, rule_id: str, path: str, message: str) -> None:
        rule = RULES[rule_id]
        self.sink.append(
            Finding(rule_id, rule.severity, self.ref, container.name if container else None, path, message, rule.remedy)
        )

    def issues(self, container: ContainerSite, issues: list[QuantityIssue]) -> None:
        for issue in issues:
            self(container, issue.rule, issue.path, issue.message)


def _merged(env: ResolvedEnv, image_env: Mapping[str, str], name: str) -> str:
    value = env.values.get(name)
    if value is not None:
        return value.value or ""
    return image_env.get(name, "")


def _allow_reason(site: PodSpecSite, key: str) -> tuple[str, str | None]:
    for metadata, base in (
        (site.pod_metadata, site.metadata_path),
        (site.object_metadata, join_path(site.prefix, "metadata")),
    ):
        annotations = as_mapping(metadata.get("annotations"))
        if key in annotations:
            value = annotations[key]
            return (value.strip() if isinstance(value, str) else ""), key_path(f"{base}.annotations", key)
    return "", None


def privilege_escalations(container: ContainerSite) -> list[tuple[str, str]]:
    security = as_mapping(container.container.get("securityContext"))
    if not security:
        return []
    base = f"{container.path}.securityContext"
    found = []
    if security.get("privileged") is True:
        found.append((f"{base}.privileged", "privileged: true"))
    added = as_list(as_mapping(security.get("capabilities")).get("add"))
    for index, capability in enumerate(added):
        if isinstance(capability, str) and capability.strip().upper().removeprefix("CAP_") in ("SYS_ADMIN", "ALL"):
            found.append((f"{base}.capabilities.add[{index}]", f"capability {capability}"))
    return found


def pod_gpu_intent(spec: Mapping[str, Any]) -> list[str]:
    signs = []
    for key, value in as_mapping(spec.get("nodeSelector")).items():
        if isinstance(key, str) and _GPU_NODE_LABEL.search(key):
            signs.append(f"node selector {key}={value}")
    for key in _affinity_keys(spec):
        signs.append(f"node affinity on {key}")
    for toleration in as_list(spec.get("tolerations")):
        if isinstance(toleration, dict):
            words = f"{as_text(toleration.get('key'))} {as_text(toleration.get('value'))}"
            if _GPU_NODE_LABEL.search(words):
                signs.append(f"toleration {words.strip()}")
    runtime = spec.get("runtimeClassName")
    if isinstance(runtime, str) and "nvidia" in runtime.lower():
        signs.append(f"runtimeClassName {runtime}")
    return signs


def _affinity_keys(spec: Mapping[str, Any]) -> Iterator[str]:
    node_affinity = as_mapping(as_mapping(spec.get("affinity")).get("nodeAffinity"))
    required = as_list(
        as_mapping(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")).get("nodeSelectorTerms")
    )
    preferred = [
        as_mapping(p).get("preference")
        for p in as_list(node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution"))
    ]
    for term in (*required, *preferred):
        for expression in as_list(as_mapping(term).get("matchExpressions")):
            key = as_mapping(expression).get("key")
            if isinstance(key, str) and _GPU_NODE_LABEL.search(key):
                yield key


def gpu_host_path_volumes(spec: Mapping[str, Any]) -> dict[str, tuple[int, str]]:
    """Volumes of GPU device or driver host paths, by name: (index, host path)."""
    volumes: dict[str, tuple[int, str]] = {}
    for index, volume in enumerate(as_list(spec.get("volumes"))):
        if isinstance(volume, dict) and "hostPath" in volume and isinstance(volume.get("name"), str):
            host_path = as_text(as_mapping(volume.get("hostPath")).get("path"))
            if host_path and gpu_host_path(host_path):
                volumes[volume["name"]] = (index, host_path)
    return volumes


def gpu_host_path(path: str) -> bool:
    """Device nodes (/dev, /dev/nvidia*, /dev/char), the driver root (/run/nvidia) or driver files."""
    normal = posixpath.normpath(path) if path else ""
    if normal in ("/dev", "/dev/char") or normal.startswith("/dev/nvidia"):
        return True
    if any(normal == d or normal.startswith(d + "/") for d in _GPU_HOST_DIRS):
        return True
    return posixpath.basename(normal).startswith(_DRIVER_FILE_PREFIXES)


def device_list_mount(mount_path: str) -> bool:
    if "nvidia-container-devices" not in mount_path:
        return False
    normal = posixpath.normpath(mount_path)
    return any(normal == root or normal.startswith(root + "/") for root in DEVICE_LIST_MOUNT_ROOTS)


def _device_mounts(container: ContainerSite, volumes: Mapping[str, tuple[int, str]], emit: _Emitter) -> list[str]:
    mounts = container.container.get("volumeMounts")
    if not isinstance(mounts, list) or not mounts:
        return []
    spec_path = container.path.rsplit(".", 1)[0]
    found = []
    for index, mount in enumerate(mounts):
        if not isinstance(mount, dict):
            continue
        mount_path = as_text(mount.get("mountPath"))
        if device_list_mount(mount_path):
            emit(
                container,
                "KGPU202",
                f"{container.path}.volumeMounts[{index}].mountPath",
                f"container {container.name!r} mounts volume {mount.get('name')!r} at {mount_path}: with "
                "accept-nvidia-visible-devices-as-volume-mounts the NVIDIA runtime reads this as a request for "
                "the GPUs named under it, which the scheduler does not count",
            )
            found.append(f"mount at {mount_path}")
        entry = volumes.get(as_text(mount.get("name"))) if volumes else None
        if entry is not None:
            volume_index, host_path = entry
            emit(
                container,
                "KGPU201",
                f"{spec_path}.volumes[{volume_index}].hostPath.path",
                f"container {container.name!r} mounts hostPath {host_path} (volume {mount.get('name')!r}) at "
                f"{mount_path}: GPU device nodes or driver files reached this way bypass the scheduler's GPU count",
            )
            found.append(f"hostPath {host_path}")
    return found


def _runtime_class_rule(site: PodSpecSite, pod_has_gpu: bool, emit: _Emitter) -> None:
    runtime = site.spec.get("runtimeClassName")
    if not pod_has_gpu and isinstance(runtime, str) and "nvidia" in runtime.lower():
        emit(
            None,
            "KGPU601",
            f"{site.path}.runtimeClassName",
            f"runtimeClassName {runtime} runs the pod with the NVIDIA runtime, but no container requests a GPU; "
            "with an image or env that selects GPUs it gets them without the scheduler counting them",
        )


def _annotation_rule(site: PodSpecSite, pod_has_gpu: bool, emit: _Emitter) -> None:
    if pod_has_gpu:
        return
    annotations = as_mapping(site.pod_metadata.get("annotations"))
    if not annotations:
        return
    base = f"{site.metadata_path}.annotations"
    for key in annotations:
        if isinstance(key, str) and (key.startswith(_DEVICE_ANNOTATION_PREFIXES) or key in _DEVICE_ANNOTATION_KEYS):
            emit(
                None,
                "KGPU602",
                key_path(base, key),
                f"annotation {key} asks the container runtime to inject devices, which are not privilege-gated "
                "and not counted by the scheduler; no container in the pod requests a GPU",
            )


# ---------------------------------------------------------------------------------------------
# A run over documents


class DocumentLike(Protocol):
    @property
    def data(self) -> Any: ...

    @property
    def source(self) -> str: ...

    @property
    def index(self) -> int: ...

    @property
    def line(self) -> int | None: ...


@dataclass
class ValidationResult:
    findings: list[Finding] = field(default_factory=list)
    allowed: list[Allowed] = field(default_factory=list)
    not_checked: list[NotChecked] = field(default_factory=list)
    objects_checked: int = 0
    documents: int = 0

    def extend(self, other: ValidationResult) -> None:
        self.findings += other.findings
        self.allowed += other.allowed
        self.not_checked += other.not_checked
        self.objects_checked += other.objects_checked
        self.documents += other.documents


def _objects_of(data: Any) -> list[Any]:
    items = data.get("items") if str(data.get("kind", "")).endswith("List") else None
    return items if isinstance(items, list) else [data]


def index_env_sources(
    documents: Iterable[DocumentLike], sources: DocumentEnvSources | None = None
) -> DocumentEnvSources:
    sources = sources if sources is not None else DocumentEnvSources()
    for doc in documents:
        if isinstance(doc.data, dict):
            for obj in _objects_of(doc.data):
                if isinstance(obj, dict) and obj.get("kind") in ("ConfigMap", "Secret"):
                    sources.add(obj, f"{doc.source} document {doc.index}")
    return sources


def needs_env_sources(site: PodSpecSite) -> bool:
    """Whether any container's env may read a ConfigMap or Secret that matters to the rules."""
    return any(env_may_matter(c.container) for c in iter_containers(site))


def check_sites(checker: PodChecker, sites: Iterable[PodSpecSite], result: ValidationResult) -> None:
    for site in sites:
        findings, allowed = checker.check(site)
        result.findings += findings
        result.allowed += allowed
        result.objects_checked += 1


def validate_documents(
    documents: Iterable[DocumentLike], config: RuleConfig | None = None, sources: EnvSources | None = None
) -> ValidationResult:
    """Check documents as they stream in, keeping none of them.

    Without explicit `sources`, ConfigMaps and Secrets among the documents resolve envFrom and
    valueFrom; a pod spec whose env may need them waits until every document has been read.
    The findings come out in input order all the same.
    """
    own_sources = DocumentEnvSources() if sources is None else None
    checker = PodChecker(config, own_sources if own_sources is not None else sources)
    result = ValidationResult()
    parts: list[ValidationResult] = []  # per pod spec with findings, in input order
    deferred: list[tuple[ValidationResult, PodSpecSite]] = []
    for doc in documents:
        result.documents += 1
        if doc.data is None:
            continue
        if own_sources is not None:
            index_env_sources([doc], own_sources)
        sites, skipped = walk_document(doc.data, source=doc.source, document=doc.index, line=doc.line)
        result.not_checked += skipped
        result.objects_checked += len(sites)
        for site in sites:
            part = ValidationResult()
            if own_sources is not None and needs_env_sources(site):
                deferred.append((part, site))
            else:
                check_sites(checker, [site], part)
            parts.append(part)
    for part, site in deferred:
        check_sites(checker, [site], part)
    for part in parts:
        result.findings += part.findings
        result.allowed += part.allowed
    return result


def with_line(finding: Finding, line: int | None) -> Finding:
    return replace(finding, line=line) if line is not None else finding


def pod_site(obj: Mapping[str, Any], ref: ObjectRef, *, ephemeral_only: bool = False) -> PodSpecSite | None:
    """A live Pod as a site; with `ephemeral_only`, only its ephemeral containers are checked."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return None
    metadata = as_mapping(obj.get("metadata"))
    if ephemeral_only:
        return PodSpecSite(
            ref, spec, "spec", metadata, metadata, "metadata", "", ("ephemeralContainers",), pod_level=False
        )
    return PodSpecSite(ref, spec, "spec", metadata, metadata, "metadata")
