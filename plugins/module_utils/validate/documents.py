# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A validation run over documents: pod specs found, env sources indexed, findings collected."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Protocol

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import as_mapping
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.trainer_runtimes import runtime_key
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.workloads import (
    NotChecked,
    ObjectRef,
    PodSpecSite,
    iter_containers,
    object_ref,
    walk_document,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.checker import PodChecker, RuleConfig
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.env import (
    DocumentEnvSources,
    EnvSources,
    env_may_matter,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.findings import Allowed, Finding
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.manifests import LoadError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.trainer_pairs import (
    TrainerPairs,
    described,
    judge_runtime,
)

# Sources that are not files: no physical location in SARIF.
NON_FILE_SOURCES = ("definition", "cluster")


class DocumentLike(Protocol):
    @property
    def data(self) -> Any:
        """The parsed document."""

    @property
    def source(self) -> str:
        """Where it came from: a file path, or a source that is not a file."""

    @property
    def index(self) -> int:
        """Its position among the documents of its source, from 0."""

    @property
    def line(self) -> int | None:
        """Its first line (1-based), None where not known."""


def add_up(into: Any, other: Any) -> None:
    """Adds each field of ``other`` (lists and counts) to the same field of ``into``."""
    for name in (f.name for f in fields(into)):
        setattr(into, name, getattr(into, name) + getattr(other, name))


@dataclass
class ValidationResult:
    findings: list[Finding] = field(default_factory=list)
    allowed: list[Allowed] = field(default_factory=list)
    not_checked: list[NotChecked] = field(default_factory=list)
    objects_checked: int = 0
    documents: int = 0
    notes: list[str] = field(default_factory=list)  # one per pod spec checked by shape

    def extend(self, other: ValidationResult) -> None:
        add_up(self, other)


def shape_note(site: PodSpecSite) -> str:
    """What the report says of a pod spec found by its shape in an object of a kind not in the tables."""
    ref = site.ref
    name = f"{ref.namespace}/{ref.name}" if ref.namespace else ref.name or "(unnamed)"
    where = f"{ref.source} document {ref.document}" if ref.document is not None else ref.source or "(input)"
    return f"checked by shape: {ref.kind} {name} ({ref.api_version or 'no apiVersion'}) in {where}: pod spec at {site.path}"


def walk(data: Any, result: ValidationResult, **where: Any) -> list[PodSpecSite]:
    """The pod specs of one document; what is not checked, and what was found by shape, go to `result`."""
    sites, skipped = walk_document(data, **where)
    result.not_checked += skipped
    result.notes += [shape_note(site) for site in sites if site.by_shape]
    return sites


def _objects_of(data: Any) -> list[Any]:
    return [obj for obj, _prefix in objects_with_prefix(data)]


def objects_with_prefix(data: Any) -> list[tuple[Any, str]]:
    """The objects of a document (the items of a List), each with the path prefix of its sites."""
    items = data.get("items") if isinstance(data, dict) and str(data.get("kind", "")).endswith("List") else None
    if isinstance(items, list):
        return [(item, f"items[{index}]") for index, item in enumerate(items)]
    return [(data, "")]


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


@dataclass
class DocumentScan:
    """Documents read so far: counts and objects not checked in `result`, one part per pod spec in input
    order (its findings), the pod specs that wait for every ConfigMap and Secret of the run, and those
    of the Trainer's runtimes and TrainJobs that wait for each other."""

    result: ValidationResult = field(default_factory=ValidationResult)
    parts: list[ValidationResult] = field(default_factory=list)
    deferred: list[tuple[ValidationResult, PodSpecSite]] = field(default_factory=list)
    trainer: TrainerPairs = field(default_factory=TrainerPairs)


def scan_documents(
    documents: Iterable[DocumentLike],
    checker: PodChecker,
    own_sources: DocumentEnvSources | None,
    scan: DocumentScan | None = None,
) -> DocumentScan:
    """Check the pod specs of the documents; with `own_sources`, index their ConfigMaps and Secrets there
    and defer the pod specs whose env may need them (finish_scan checks those)."""
    scan = scan if scan is not None else DocumentScan()
    result = scan.result
    for doc in documents:
        result.documents += 1
        if doc.data is None:
            continue
        if own_sources is not None:
            index_env_sources([doc], own_sources)
        sites = walk(doc.data, result, source=doc.source, document=doc.index, line=doc.line)
        result.objects_checked += len(sites)
        objects = {prefix: obj for obj, prefix in objects_with_prefix(doc.data)}
        for prefix, obj in objects.items():
            if isinstance(obj, dict):
                scan.trainer.index(obj, object_ref(obj, source=doc.source, document=doc.index, line=doc.line), prefix)
        for site in sites:
            part = ValidationResult()
            if scan.trainer.hold(part, site, objects.get(site.prefix)):
                pass  # checked by finish_scan, with the TrainJobs or runtimes of the whole run
            elif own_sources is not None and needs_env_sources(site):
                scan.deferred.append((part, site))
            else:
                check_sites(checker, [site], part)
            scan.parts.append(part)
    return scan


def finish_scan(scan: DocumentScan, checker: PodChecker) -> ValidationResult:
    """Check the deferred pod specs, now that every source is known, and the Trainer's runtimes with the
    TrainJobs that fill them; gather the findings in input order."""
    for part, site in scan.deferred:
        check_sites(checker, [site], part)
    judge_trainer_pairs(scan.trainer, checker, scan.result)
    result = scan.result
    for part in scan.parts:
        result.findings += part.findings
        result.allowed += part.allowed
    return result


def judge_trainer_pairs(pairs: TrainerPairs, checker: PodChecker, result: ValidationResult) -> None:
    for part, site, named in pairs.held_trainers:
        if named in pairs.runtimes:
            result.notes.append(f"{described(site.ref)}: trainer fields checked in {named.text()}, as it fills it")
        else:
            check_sites(checker, [site], part)
    for part, site, runtime in pairs.held_runtimes:
        key = runtime_key(runtime)
        jobs = pairs.trainjobs.get(key, []) if key is not None else []
        findings, allowed, notes = judge_runtime(site, runtime, jobs, checker.check) if jobs else ([], [], [])
        if not notes:
            check_sites(checker, [site], part)
            continue
        part.findings += findings
        part.allowed += allowed
        result.notes += notes


def check_objects(checker: PodChecker, objects: Iterable[Any], result: ValidationResult, source: str) -> None:
    """Check whole objects (the live audit's), the Trainer's runtimes as the TrainJobs among them fill them."""
    pairs = TrainerPairs()
    parts: list[ValidationResult] = []
    for obj in objects:
        sites = walk(obj, result, source=source)
        result.objects_checked += len(sites)
        if isinstance(obj, dict):
            pairs.index(obj, object_ref(obj, source=source), "")
        for site in sites:
            part = ValidationResult()
            if not pairs.hold(part, site, obj):
                check_sites(checker, [site], part)
            parts.append(part)
    judge_trainer_pairs(pairs, checker, result)
    for part in parts:
        result.findings += part.findings
        result.allowed += part.allowed


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
    return finish_scan(scan_documents(documents, checker, own_sources), checker)


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


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    allowed: list[Allowed] = field(default_factory=list)
    not_checked: list[NotChecked] = field(default_factory=list)
    errors: list[LoadError] = field(default_factory=list)
    files: int = 0
    documents: int = 0
    objects_checked: int = 0
    notes: list[str] = field(default_factory=list)

    def extend(self, other: Report) -> None:
        add_up(self, other)
