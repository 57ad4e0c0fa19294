# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rules run over one pod spec: its facts worked out once, every rule of the table applied,
skipped rules dropped, and findings allowed where the object gives a reason or runs a known GPU
system component."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings import registry
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.catalogue import KINDS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.components import (
    BUILTIN_CATALOGUE,
    ComponentCatalogue,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import gpu_resource_matcher
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.workloads import ObjectRef, PodSpecSite
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.analysis import analyse
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.env import EnvSources, NoEnvSources
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.findings import Allowed, Finding
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.images import ConfigReader, ImageCatalogue
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.rules import (
    CHECKS,
    DEFAULT_ALLOW_ANNOTATION,
    RULES,
    Hit,
)


@dataclass(frozen=True)
class RuleConfig:
    gpu_resources: tuple[str, ...] = ()
    image_env: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    allow_annotation: str = DEFAULT_ALLOW_ANNOTATION
    skip_rules: frozenset[str] = frozenset()
    components: ComponentCatalogue = field(default=BUILTIN_CATALOGUE, compare=False)
    # The read of each image's own config from its registry (validate/registry_reads.py); None: offline.
    image_reader: ConfigReader | None = field(default=None, compare=False)


def unknown_rules(rule_ids: Iterable[str]) -> list[str]:
    return sorted(r for r in rule_ids if r not in RULES)


class PodChecker:
    """The rules, compiled once for a run: the rules to run, a cached GPU-name matcher and the image
    catalogue."""

    def __init__(self, config: RuleConfig | None = None, sources: EnvSources | None = None) -> None:
        self.config = config or RuleConfig()
        self.sources: EnvSources = sources or NoEnvSources()
        self.images = ImageCatalogue(self.config.image_env, self.config.image_reader)
        self.rules = [(rule, CHECKS[rule]) for rule in RULES if rule not in self.config.skip_rules]
        self._matcher = gpu_resource_matcher(self.config.gpu_resources)
        self._gpu_names: dict[str, bool] = {}

    def is_gpu(self, name: str) -> bool:
        known = self._gpu_names.get(name)
        if known is None:
            known = self._gpu_names[name] = isinstance(name, str) and self._matcher(name)
        return known

    def check(self, site: PodSpecSite) -> tuple[list[Finding], list[Allowed]]:
        config = self.config
        pod = analyse(site, self.is_gpu, self.sources, self.images, config.allow_annotation, config.components)
        hits = [(rule, hit) for rule, check in self.rules for hit in check(pod)]
        if len(pod.containers) > 1 and len(hits) > 1:
            # Container by container, the pod's own findings last; the table's order within each.
            order = {id(c.site): index for index, c in enumerate(pod.containers)}
            hits.sort(key=lambda pair: order.get(id(pair[1].container), len(order)))
        ref, reason = site.ref, pod.allowed_because
        findings = [_finding(rule, hit, ref) for rule, hit in hits]
        if not reason:
            return findings, []
        allowed = [Allowed(f, reason) for f in findings if RULES[f.rule].allowable]
        return [f for f in findings if not RULES[f.rule].allowable], allowed


def _finding(rule: str, hit: Hit, ref: ObjectRef) -> Finding:
    """The registry attaches the kind's severity, message and remedy to the check's hit."""
    found = KINDS.finding(registry.Hit(rule, hit.fields))
    container = hit.container.name if hit.container else None
    return Finding(rule, found.severity, ref, container, hit.path, found.message, found.remedy)
