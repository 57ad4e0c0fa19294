# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The offline check of a device-plugin config: every key the plugin would reject (it exits) or
ignore (it starts, and the capacity is not what the config says), as a ``Hit`` with the key's path,
and what the config makes the plugin advertise (the summary the deployment's verification expects).

Pure: a parsed YAML document in, hits and a summary out. schema.py names the upstream sources.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import Hit
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_config import schema
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_config.schema import Key

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")
_DURATION = re.compile(r"^[-+]?((\d+(\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h))+$|^[-+]?0$")


UNSEEN, STATIC, HELM, OPERATOR = "unseen", "static", "helm", "operator"
DEPLOYMENT_WORDS = {
    STATIC: "the static DaemonSet sets no MPS_ROOT and flags.mpsRoot is not set",
    HELM: "the Helm chart's mps.root is empty, and the chart passes it as MPS_ROOT, which overrides flags.mpsRoot",
    OPERATOR: "the GPU Operator's MPS root is empty",
}


@dataclass(frozen=True)
class Deployment:
    """What the check sees of how the plugin is deployed, which sets some of its flags from outside the
    config (environment variables override the file, config.go:43-56): nothing (a bare config or a
    ConfigMap), the static DaemonSet, or the values of the Helm chart or of the GPU Operator."""

    kind: str = UNSEEN
    mps_root: str = ""  # the MPS_ROOT it sets
    mig_strategy: str | None = None  # the MIG_STRATEGY it sets, schema.MIG_UNKNOWN if unseen; None: none


STATIC_DAEMONSET = Deployment(STATIC)


@dataclass
class Checker:
    """One config's walk: the release whose schema applies, the config's name, the deployment, the hits so far."""

    release: str = schema.DEFAULT_RELEASE
    config: str = "config"
    deployment: Deployment = Deployment()
    hits: list[Hit] = field(default_factory=list)
    mig_strategy: str = "none"  # the MIG strategy the plugin runs with: the deployment's, else flags.migStrategy

    def hit(self, kind: str, path: str, **fields: Any) -> None:
        self.hits.append(
            Hit(kind, {"path": path, "release": self.release, **fields}, {"config": self.config, "path": path})
        )


def described(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, list):
        return "a list"
    return "a mapping" if isinstance(value, Mapping) else type(value).__name__


def type_ok(value: Any, expected: str) -> bool:
    """Whether encoding/json would decode this value (from YAML) into a field of that type."""
    if value is None:
        return True
    checks = {
        schema.STRING: lambda v: isinstance(v, str),
        schema.BOOLEAN: lambda v: isinstance(v, bool),
        schema.MAPPING: lambda v: isinstance(v, Mapping),
        schema.LIST: lambda v: isinstance(v, list),
        schema.STRINGS: lambda v: isinstance(v, str) or (isinstance(v, list) and all(isinstance(i, str) for i in v)),
        schema.INTEGERS: lambda v: (
            isinstance(v, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in v)
        ),
        schema.DURATION: lambda v: (
            (isinstance(v, int | float) and not isinstance(v, bool))
            or (isinstance(v, str) and bool(_DURATION.match(v)))
        ),
    }
    return checks.get(expected, lambda v: True)(value)


def section_keys(
    check: Checker, mapping: Mapping[str, Any], path: str, table: Mapping[str, Key], exact: bool = False
) -> dict[str, Any]:
    """The keys of a section the plugin reads (by their right names), after reporting the others:
    unknown, misplaced, of a later release, or matched only without regard to case."""
    read: dict[str, Any] = {}
    lowered = {name.lower(): name for name in table}
    for raw, value in mapping.items():
        name = str(raw)
        where = f"{path}.{name}" if path else name
        if name in table and schema.reads(table[name], check.release):
            read[name] = value
        elif name in table:
            check.hit("config_key_not_in_release", where, since=table[name].since)
        elif not exact and name.lower() in lowered:
            right = lowered[name.lower()]
            check.hit("config_key_case", where, right=f"{path}.{right}" if path else right)
            read.setdefault(right, value)
        else:
            unknown_key(check, name, where, path, table)
    for name, value in read.items():
        key = table[name]
        where = f"{path}.{name}" if path else name
        if not type_ok(value, key.type):
            check.hit("config_wrong_type", where, found=described(value), expected=key.type, example=key.example)
            read[name] = None
    return read


def unknown_key(check: Checker, name: str, where: str, path: str, table: Mapping[str, Key]) -> None:
    home = schema.home_of(name, check.release)
    if home and home != where:
        check.hit("config_misplaced_key", where, key=name, right=home)
        return
    known = ", ".join(k for k, v in table.items() if schema.reads(v, check.release))
    check.hit("config_unknown_key", where, parent=path or "the top level", known=known)


def resource_name_problem(value: Any) -> tuple[str, str | None]:
    """The name the plugin makes of a resource name (prefixed with nvidia.com/), and why it refuses it."""
    if not isinstance(value, str):
        return "", f"{described(value)} is not a resource name"
    name = value if value.startswith(f"{schema.RESOURCE_PREFIX}/") else f"{schema.RESOURCE_PREFIX}/{value}"
    if len(name) > schema.MAX_RESOURCE_NAME:
        return name, f"{name} is longer than {schema.MAX_RESOURCE_NAME} characters"
    local = name.split("/", 1)[1]
    if len(local) > 253 or not _DNS_SUBDOMAIN.match(local):
        return name, f"{local!r} is not a DNS subdomain (lower-case letters, digits, '-' and '.')"
    return name, None


def device_ref_ok(item: Any) -> bool:
    """A GPU index, a MIG index (gpu:mig), or a GPU or MIG UUID (replicas.go ReplicatedDeviceRef)."""
    if isinstance(item, int) and not isinstance(item, bool):
        return item >= 0
    if not isinstance(item, str):
        return False
    if item.isdigit() or re.fullmatch(r"\d+:\d+", item):
        return True
    for prefix in ("GPU-", "MIG-"):
        if item.startswith(prefix) and _is_uuid(item[len(prefix) :]):
            return True
    parts = item.split("/")
    return (
        item.startswith("MIG-GPU-")
        and len(parts) == 3
        and _is_uuid(parts[0][8:])
        and all(p.isdigit() for p in parts[1:])
    )


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def devices_problem(value: Any) -> tuple[bool, str | None]:
    """(whether it selects fewer than all devices, why the plugin refuses it)."""
    if value is None or value == "all":
        return False, None
    if isinstance(value, str):
        return False, "the only string devices takes is 'all'"
    if isinstance(value, int) and not isinstance(value, bool):
        return (True, None) if value > 0 else (False, "a count of devices must be above 0")
    if isinstance(value, list):
        bad = [item for item in value if not device_ref_ok(item)]
        return (False, f"{bad[0]!r} is neither a GPU index, a MIG index nor a UUID") if bad else (True, None)
    return False, f"{described(value)} is not a devices spec"


def check_choices(check: Checker, path: str, value: Any) -> None:
    choices, error = schema.CHOICES[path]
    values = value if isinstance(value, list) else [value]
    for item in values:
        if isinstance(item, str) and item not in choices:
            check.hit("config_invalid_choice", path, value=item, error=error, choices=", ".join(choices))


def check_flags(check: Checker, flags: Mapping[str, Any]) -> dict[str, Any]:
    read = section_keys(check, flags, "flags", schema.FLAGS)
    for section, table in (("plugin", schema.PLUGIN_FLAGS), ("gfd", schema.GFD_FLAGS)):
        if isinstance(read.get(section), Mapping):
            read[section] = section_keys(check, read[section], f"flags.{section}", table)
    plugin = read.get("plugin") or {}
    for path, value in (
        ("flags.migStrategy", read.get("migStrategy")),
        ("flags.deviceDiscoveryStrategy", read.get("deviceDiscoveryStrategy")),
        ("flags.plugin.deviceIDStrategy", plugin.get("deviceIDStrategy")),
        ("flags.plugin.deviceListStrategy", plugin.get("deviceListStrategy")),
    ):
        if value is not None:
            check_choices(check, path, value)
    return read


def check_resource_patterns(check: Checker, resources: Mapping[str, Any]) -> None:
    read = section_keys(check, resources, "resources", schema.RESOURCES)
    entries = [(f"resources.{k}[{i}]", e) for k in ("gpus", "mig") for i, e in enumerate(read.get(k) or [])]
    for path, entry in entries:
        if not isinstance(entry, Mapping):
            check.hit("config_wrong_type", path, found=described(entry), expected=schema.MAPPING, example="")
            continue
        entry_keys = section_keys(check, entry, path, schema.RESOURCE_PATTERN, exact=True)
        for name in ("pattern", "name"):
            if name not in entry:
                check.hit(
                    "config_missing_field",
                    path,
                    field=name,
                    error=f"resources must have a '{name}' field set",
                    remedy=f"give {path} a {name}",
                )
        if "name" in entry_keys:
            _name, problem = resource_name_problem(entry_keys["name"])
            if problem:
                check.hit("config_invalid_resource_name", f"{path}.name", value=entry_keys["name"], problem=problem)
    if entries:
        check.hit("config_resources_ignored", "resources")


def check_imex(check: Checker, imex: Mapping[str, Any]) -> None:
    read = section_keys(check, imex, "imex", schema.IMEX)
    ids = read.get("channelIDs")
    if ids and ids != [0]:
        check.hit("config_imex_channels", "imex.channelIDs", value=ids)


@dataclass(frozen=True)
class Shared:
    """A replicated resource as the plugin advertises it."""

    name: str
    advertised: str
    replicas: int
    path: str = ""


def check_replicated(check: Checker, section: str, mapping: Mapping[str, Any]) -> tuple[list[Shared], dict[str, Any]]:
    """One sharing section (timeSlicing or mps): its resources as advertised, and its keys as read."""
    path = f"sharing.{section}"
    read = section_keys(check, mapping, path, schema.REPLICATED, exact=True)
    if not read.get("resources"):
        check.hit(
            "config_missing_field",
            path,
            field="resources",
            error="no resources specified",
            remedy=f"list the resources to share under {path}.resources, e.g. - name: nvidia.com/gpu, replicas: 4",
        )
        return [], read
    strategy = schema.STRATEGY_MPS if section == "mps" else schema.STRATEGY_TIME_SLICING
    shared = []
    for index, entry in enumerate(read["resources"]):
        item = check_shared_resource(check, f"{path}.resources[{index}]", entry, read, strategy)
        if item:
            shared.append(item)
    return shared, read


def check_shared_resource(
    check: Checker, path: str, entry: Any, section: Mapping[str, Any], strategy: str
) -> Shared | None:
    if not isinstance(entry, Mapping):
        check.hit("config_wrong_type", path, found=described(entry), expected=schema.MAPPING, example="")
        return None
    read = section_keys(check, entry, path, schema.REPLICATED_RESOURCE, exact=True)
    for name, error, remedy in (
        ("name", "no resource name specified", "name the resource to share, e.g. name: nvidia.com/gpu"),
        ("replicas", "no replicas specified", "give the number of replicas per GPU, e.g. replicas: 4"),
    ):
        if name not in entry:
            check.hit("config_missing_field", path, field=name, error=error, remedy=remedy)
    resource, problem = resource_name_problem(read.get("name")) if "name" in entry else ("", None)
    if problem:
        check.hit("config_invalid_resource_name", f"{path}.name", value=read.get("name"), problem=problem)
    replicas = check_replicas(check, f"{path}.replicas", entry, strategy) if "replicas" in entry else None
    selects_fewer, devices_error = devices_problem(read.get("devices"))
    if devices_error:
        check.hit("config_invalid_devices", f"{path}.devices", value=read.get("devices"), problem=devices_error)
    elif selects_fewer:
        check.hit("config_devices_ignored", f"{path}.devices", value=read.get("devices"))
    if not resource or problem or not replicas:
        return None
    advertised = resource + schema.SHARED_SUFFIX if section.get("renameByDefault") else resource
    check_rename(check, path, read.get("rename"), advertised, strategy)
    if not shared_resource_advertised(check, f"{path}.name", resource):
        return None
    return Shared(resource, advertised, replicas, path)


def shared_resource_advertised(check: Checker, path: str, resource: str) -> bool:
    """Whether a device resource of the shared name exists under the MIG strategy; the plugin skips a shared
    resource that none has, and nothing is shared (schema.RULES: config_shared_resource_not_advertised)."""
    mig = check.mig_strategy
    if mig not in (*schema.MIG_STRATEGIES, schema.MIG_UNKNOWN) or schema.device_resource(resource, mig):
        return True
    if resource.startswith(schema.MIG_RESOURCE_PREFIX):
        exists = "no MIG resources" if mig == "none" else f"MIG devices as {schema.GPU_RESOURCE}"
        fix = (
            f"set flags.migStrategy: mixed to advertise MIG devices as {schema.MIG_RESOURCE_PREFIX}<profile>, "
            f"or share {schema.GPU_RESOURCE}"
        )
    else:
        exists = f"every GPU as {schema.GPU_RESOURCE}"
        fix = f"share {schema.GPU_RESOURCE}" + (
            "; renameByDefault: true advertises it as " + schema.GPU_RESOURCE + schema.SHARED_SUFFIX
            if resource.endswith(schema.SHARED_SUFFIX)
            else ""
        )
    check.hit("config_shared_resource_not_advertised", path, value=resource, mig=mig, exists=exists, fix=fix)
    return False


def check_replicas(check: Checker, path: str, entry: Mapping[str, Any], strategy: str) -> int | None:
    """The replica count, when the plugin takes it (an integer of 2 or more; an integral float is an integer
    once sigs.k8s.io/yaml has turned it into JSON)."""
    value = entry["replicas"]
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        check.hit("config_wrong_type", path, found=described(value), expected="an integer of 2 or more", example=": 4")
        return None
    if value < 2:
        check.hit(
            "config_replicas_below_two", path, value=value, strategy=f"sharing.{schema.SECTION_OF_STRATEGY[strategy]}"
        )
        return None
    return value


def check_rename(check: Checker, path: str, rename: Any, advertised: str, strategy: str) -> None:
    """The plugin of these releases keeps rename only where it is the default (<name>.shared under
    renameByDefault); any other rename is reset (replicas.go disableResoureRenaming)."""
    if rename is None or rename == "":
        return
    wanted, problem = resource_name_problem(rename)
    if problem:
        check.hit("config_invalid_resource_name", f"{path}.rename", value=rename, problem=problem)
    elif wanted != advertised:
        base = advertised.removesuffix(schema.SHARED_SUFFIX)
        check.hit(
            "config_rename_ignored",
            f"{path}.rename",
            value=rename,
            advertised=advertised,
            strategy=schema.SECTION_OF_STRATEGY[strategy],
            shared=base + schema.SHARED_SUFFIX,
        )


def check_sharing(check: Checker, sharing: Mapping[str, Any], flags: Mapping[str, Any]) -> tuple[str, list[Shared]]:
    """The sharing strategy the plugin takes (mps wins over timeSlicing, sharing.go) and what it shares."""
    read = section_keys(check, sharing, "sharing", schema.SHARING)
    sections = {name: read[name] for name in ("timeSlicing", "mps") if isinstance(read.get(name), Mapping)}
    if "timeSlicing" in read and read["timeSlicing"] is None and not wrong_type(check, "sharing.timeSlicing"):
        sections["timeSlicing"] = {}  # null reaches its decoder (not a pointer); an empty mps: is no MPS
    if len(sections) == 2:
        check.hit("config_sharing_both", "sharing")
    found = {name: check_replicated(check, name, section) for name, section in sections.items()}
    if "mps" in found:
        shared, keys = found["mps"]
        strategy = schema.STRATEGY_MPS if shared else schema.STRATEGY_NONE
        check_mps(check, shared, keys, flags)
    elif "timeSlicing" in found:
        shared = found["timeSlicing"][0]
        strategy = schema.STRATEGY_TIME_SLICING if shared else schema.STRATEGY_NONE
    else:
        shared, strategy = [], schema.STRATEGY_NONE
    return strategy, shared


def wrong_type(check: Checker, path: str) -> bool:
    return any(h.kind == "config_wrong_type" and h.where["path"] == path for h in check.hits)


def check_mps(check: Checker, shared: list[Shared], keys: Mapping[str, Any], flags: Mapping[str, Any]) -> None:
    if keys.get("failRequestsGreaterThanOne") is False:
        check.hit(
            "config_mps_fail_requests_ignored",
            "sharing.mps.failRequestsGreaterThanOne",
            resource=shared[0].advertised if shared else "shared resource",
        )
    if not shared:
        return
    deployment = check.deployment
    root = flags.get("mpsRoot") if deployment.kind == STATIC else deployment.mps_root  # the env wins (flags.go:32-49)
    if deployment.kind != UNSEEN and not root:
        check.hit("config_mps_without_root", "flags.mpsRoot", deployment=DEPLOYMENT_WORDS[deployment.kind])
    if check.mig_strategy == "mixed":
        check.hit("config_mps_mig_mixed", "flags.migStrategy")
    if deployment.kind == STATIC:
        check.hit("config_mps_not_deployable", "sharing.mps")
    for item in shared:
        check_mps_replicas(check, item)
        check.hit(
            "config_mps_one_replica_per_container",
            item.path,
            resource=item.advertised,
            replicas=item.replicas,
        )


def check_mps_replicas(check: Checker, item: Shared) -> None:
    """The MPS control daemon's clients per GPU (schema.RULES: config_mps_replicas_over_limit)."""
    fields = {"value": item.replicas, "most": schema.MPS_MAX_CLIENTS, "fewer": schema.MPS_MAX_CLIENTS_BELOW_7_5}
    if item.replicas > schema.MPS_MAX_CLIENTS:
        check.hit("config_mps_replicas_over_limit", f"{item.path}.replicas", **fields)
    elif item.replicas > schema.MPS_MAX_CLIENTS_BELOW_7_5:
        check.hit("config_mps_replicas_over_pre_volta_limit", f"{item.path}.replicas", **fields)


def check_config(
    doc: Any,
    release: str = schema.DEFAULT_RELEASE,
    name: str = "config",
    static_manifest: bool = False,
    deployment: Deployment | None = None,
) -> tuple[list[Hit], dict[str, Any]]:
    """The hits of one parsed config document, and what the plugin would advertise with it, deployed as
    the deployment says (static_manifest: NVIDIA's static DaemonSet; neither: the deployment is not seen)."""
    check = Checker(release, name, STATIC_DAEMONSET if static_manifest else deployment or Deployment())
    summary: dict[str, Any] = {
        "release": release,
        "strategy": schema.STRATEGY_NONE,
        "mig_strategy": "none",
        "shared": [],
    }
    if doc is None:
        return check.hits, summary
    if not isinstance(doc, Mapping):
        check.hit("config_unparsable", "(top level)", problem=f"the config is {described(doc)}, not a mapping")
        return check.hits, summary
    top = section_keys(check, doc, "", schema.TOP)
    version = top.get("version")
    if version is not None and version != "" and version != schema.VERSION:
        check.hit("config_unknown_version", "version", value=version)
    flags = check_flags(check, top["flags"]) if isinstance(top.get("flags"), Mapping) else {}
    own = flags.get("migStrategy") if isinstance(flags.get("migStrategy"), str) else None
    check.mig_strategy = check.deployment.mig_strategy or own or "none"
    if isinstance(top.get("resources"), Mapping):
        check_resource_patterns(check, top["resources"])
    if isinstance(top.get("imex"), Mapping):
        check_imex(check, top["imex"])
    strategy, shared = (
        check_sharing(check, top["sharing"], flags) if isinstance(top.get("sharing"), Mapping) else ("none", [])
    )
    summary.update(
        strategy=strategy,
        mig_strategy=check.mig_strategy if check.mig_strategy != schema.MIG_UNKNOWN else own or "none",
        shared=[{"name": s.name, "advertised": s.advertised, "replicas": s.replicas} for s in shared],
    )
    return check.hits, summary
