# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The container environment, resolved as the kubelet builds it: envFrom with prefixes first,
then env, the last duplicate winning, ``$(VAR)`` expanded; ConfigMap and Secret values come
from the documents of the same run or from the cluster."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import as_mapping, as_text

# Longest expanded env value kept; `$(VAR)` chains can otherwise grow exponentially.
MAX_EXPANDED_LENGTH = 64 * 1024


@dataclass(frozen=True)
class SourceData:
    """The keys of a ConfigMap or Secret. A value of None is present but unreadable."""

    values: Mapping[str, str | None]
    where: str
    secret: bool = False
    absent: bool = False  # known not to exist (the cluster said 404)


class EnvSources(Protocol):
    def config_map(self, namespace: str, name: str) -> SourceData | None:
        """The ConfigMap's keys, None where there is none to read."""

    def secret(self, namespace: str, name: str) -> SourceData | None:
        """The Secret's keys, None where there is none to read."""


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

    def update(self, later: DocumentEnvSources) -> None:
        """Add the objects of documents read after these; as within one run, the later object wins."""
        self._objects.update(later._objects)  # pylint: disable=protected-access

    def _lookup(self, kind: str, namespace: str, name: str) -> SourceData | None:
        return self._objects.get((kind, namespace, name)) or self._objects.get((kind, "", name))

    def config_map(self, namespace: str, name: str) -> SourceData | None:
        return self._lookup("ConfigMap", namespace, name)

    def secret(self, namespace: str, name: str) -> SourceData | None:
        return self._lookup("Secret", namespace, name)


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
        if match[2] not in values:
            # Labels and annotations can be set after creation (a scheduler sets one at dispatch): one the
            # manifest lacks is not known to be empty when the kubelet reads it.
            return EnvValue(
                None, path, f"the pod's {field_path}", note=f"the manifest does not set {match[1]} {match[2]!r}"
            )
        value = values[match[2]]
        if isinstance(value, str):
            return EnvValue(value, path, f"the pod's {field_path}")
    return EnvValue(
        None, path, f"the pod's {field_path or 'field'}", note=f"{field_path or 'the field'} is known only at run time"
    )
