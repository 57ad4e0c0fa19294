# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where device-plugin configs are written, and the verdict over a set of them.

A config comes as the plugin's file itself, as the entries of a ConfigMap (one config per key, the
way the Helm chart and the GPU Operator mount them), as the values of the plugin's Helm chart
(``config.map`` and ``config.default``) or as those of the GPU Operator's chart
(``devicePlugin.config.data`` and ``devicePlugin.config.default``). Values also say what the deployment
sets on the plugin (its MPS root and MIG strategy) and what the Helm chart refuses to render; a bare config
or a ConfigMap says neither (schema.RULES names the code of each).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.catalogue import KINDS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import Hit
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.results import legacy
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.severity import ERROR, severity_rank
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import as_mapping
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_config import schema
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_config.check import (
    HELM,
    OPERATOR,
    Deployment,
    check_config,
)

try:
    import yaml

    HAS_YAML = True
except ImportError:  # pragma: no cover - PyYAML is a requirement; the module says so when it is missing
    HAS_YAML = False


@dataclass
class ConfigSet:
    """Named config texts (or documents), the one the plugin reads by default, and where they came from."""

    configs: dict[str, Any]
    default: str | None = None
    source: str = ""
    hits: list[Hit] = field(default_factory=list)
    deployment: Deployment = Deployment()  # Helm or GPU Operator values: what they set on the plugin


def parse_text(text: str, name: str) -> tuple[Any, Hit | None]:
    """The document of a config text, or the hit of a text the plugin cannot parse."""
    try:
        return yaml.safe_load(text), None
    except yaml.YAMLError as exc:
        return None, unparsable(exc, name)


def unparsable(exc: Exception, name: str) -> Hit:
    problem = " ".join(str(exc).split())
    return Hit("config_unparsable", {"path": "(file)", "problem": problem}, {"config": name, "path": "(file)"})


def config_set(doc: Any, source: str, default: str | None = None) -> ConfigSet:
    """The configs a YAML document holds, by what it is (see the module docstring)."""
    mapping = as_mapping(doc)
    if mapping.get("kind") == "ConfigMap":
        data = as_mapping(mapping.get("data"))
        name = as_mapping(mapping.get("metadata")).get("name", source)
        return ConfigSet({str(k): v for k, v in data.items()}, default, f"ConfigMap {name}")
    operator = as_mapping(as_mapping(mapping.get("devicePlugin")).get("config"))
    if "data" in operator:
        data = as_mapping(operator.get("data"))
        chosen = default or operator.get("default") or None
        return ConfigSet(
            dict(data), chosen, "GPU Operator devicePlugin.config", deployment=operator_deployment(mapping)
        )
    chart = as_mapping(mapping.get("config"))
    if {"map", "name", "default"} & set(chart):
        return chart_set(mapping, chart, default)
    return ConfigSet({source: doc}, default, source)


def operator_deployment(values: Mapping[str, Any]) -> Deployment:
    """What the GPU Operator sets on the plugin: MPS_ROOT always (its own default where devicePlugin.mps.root
    is empty), MIG_STRATEGY from mig.strategy (unseen where these values leave it to the ClusterPolicy)."""
    root = as_mapping(as_mapping(values.get("devicePlugin")).get("mps")).get("root")
    strategy = as_mapping(values.get("mig")).get("strategy")
    mig = strategy if isinstance(strategy, str) and strategy else schema.MIG_UNKNOWN
    return Deployment(OPERATOR, str(root or schema.OPERATOR_MPS_ROOT), mig)


def chart_deployment(values: Mapping[str, Any]) -> Deployment:
    """What the plugin's Helm chart sets on the plugin: MPS_ROOT from mps.root, MIG_STRATEGY from migStrategy
    where it is a string (templates/daemonset-device-plugin.yml:138-142)."""
    mps = as_mapping(values.get("mps"))
    root = mps.get("root") if "root" in mps else schema.CHART_MPS_ROOT
    strategy = values.get("migStrategy")
    return Deployment(HELM, str(root or ""), strategy if isinstance(strategy, str) else None)


def chart_default(chart: Mapping[str, Any]) -> tuple[str | None, bool]:
    """The config the chart makes the default, and whether it finds one (templates/_helpers.tpl:212-232)."""
    configs = as_mapping(chart.get("map"))
    if chart.get("default"):
        return str(chart["default"]), True
    if not configs:
        return None, True
    fallbacks = chart.get("fallbackStrategies", schema.CHART_FALLBACK_STRATEGIES) or ()
    if "named" in fallbacks and "default" in configs:
        return "default", True
    if "single" in fallbacks and len(configs) == 1:
        return str(next(iter(configs))), True
    return None, "empty" in fallbacks


def chart_set(values: Mapping[str, Any], chart: Mapping[str, Any], default: str | None) -> ConfigSet:
    """The configs of the plugin's Helm values, with what the chart refuses (templates/validation.yml:22-39)."""
    source = "Helm values config"
    configs = dict(as_mapping(chart.get("map")))
    chosen, found = chart_default(chart)
    hits = []
    if chart.get("name") and configs:
        hits.append(Hit("config_chart_name_and_map", {"name": chart["name"]}, {"config": source, "path": "config"}))
    if not found:
        fallbacks = chart.get("fallbackStrategies", schema.CHART_FALLBACK_STRATEGIES) or ()
        fields = {
            "count": len(configs),
            "names": ", ".join(sorted(map(str, configs))),
            "fallbacks": ", ".join(fallbacks),
        }
        hits.append(Hit("config_chart_no_default", fields, {"config": source, "path": "config.default"}))
    if chart.get("name") and not configs:
        chosen = None  # the configs are in the ConfigMap config.name names, not in these values
    return ConfigSet(configs, default or chosen, source, hits, chart_deployment(values))


def default_hits(configs: ConfigSet) -> list[Hit]:
    if configs.default is None or configs.default in configs.configs:
        return []
    names = ", ".join(sorted(configs.configs)) or "none given"
    return [
        Hit(
            "config_default_missing",
            {"default": configs.default, "names": names},
            {"config": configs.source, "path": "default"},
        )
    ]


def check_set(
    configs: ConfigSet, release: str = schema.DEFAULT_RELEASE, static_manifest: bool = False
) -> dict[str, Any]:
    """The verdict over every config of a set: findings (errors first), each config's summary, validity."""
    hits = list(configs.hits) + default_hits(configs)
    summaries = {}
    for name, value in configs.configs.items():
        doc = value
        if isinstance(value, str):
            doc, unparsable = parse_text(value, name)
            if unparsable:
                hits.append(unparsable)
                continue
        found, summary = check_config(doc, release, name, static_manifest, configs.deployment)
        hits += found
        summaries[name] = summary
    findings = sorted((finding_dict(hit) for hit in hits), key=lambda f: severity_rank(f["severity"]))
    return {
        "valid": not any(f["severity"] == ERROR for f in findings),
        "release": release,
        "default": configs.default,
        "configs": summaries,
        "findings": findings,
    }


def finding_dict(hit: Hit) -> dict[str, Any]:
    """A config finding: the one shape, and config, path and problem (the message) as before."""
    finding = KINDS.finding(hit)
    return legacy(finding, config=finding.where.get("config"), path=finding.where.get("path"), problem=finding.message)


def report_lines(findings: Sequence[Mapping[str, Any]]) -> list[str]:
    return [
        f"{f['config']}: {f['path']}: {f['severity']} {f['kind']}: {f['problem']}. Fix: {f['remedy']}" for f in findings
    ]


def sets_from_text(text: str, source: str, default: str | None = None) -> list[ConfigSet]:
    """The config sets of a file's text: one per YAML document in it (a ConfigMap, Helm values or a config)."""
    try:
        docs = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as exc:
        return [ConfigSet({}, None, source, [unparsable(exc, source)])]
    if not docs:
        return [ConfigSet({source: None}, default, source)]
    return [
        config_set(doc, source if len(docs) == 1 else f"{source}[{index}]", default) for index, doc in enumerate(docs)
    ]


def sets_from_definition(definition: Any, default: str | None = None, source: str = "definition") -> list[ConfigSet]:
    """The config sets of what a file holds, given inline: a YAML string (which may hold several
    documents), one object, or a list of objects, each a config, a ConfigMap or Helm values."""
    if isinstance(definition, str):
        return sets_from_text(definition, source, default)
    if isinstance(definition, list):
        docs = [doc for doc in definition if doc is not None]
        if not docs:
            return [ConfigSet({source: None}, default, source)]
        if len(docs) > 1:
            return [config_set(doc, f"{source}[{index}]", default) for index, doc in enumerate(docs)]
        definition = docs[0]
    return [config_set(definition, source, default)]


def merged(results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One verdict over the verdicts of several sets (files)."""
    findings = sorted((f for r in results for f in r["findings"]), key=lambda f: severity_rank(f["severity"]))
    configs = {name: summary for r in results for name, summary in r["configs"].items()}
    return {
        "valid": all(r["valid"] for r in results),
        "release": results[0]["release"] if results else schema.DEFAULT_RELEASE,
        "configs": configs,
        "findings": findings,
    }
