# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubeflow Trainer runtimes judged with the TrainJobs of the same run that fill them.

A runtime's pod specs are no pods until a TrainJob names the runtime: then the Trainer builds them with
the TrainJob's image, env and resources per node (kube/trainer_runtimes.py). When a run holds both, the
runtime's pod specs are checked as each TrainJob that names it fills them, and the TrainJob's trainer
fields there rather than on their own. A finding on a field the TrainJob gave is reported on the TrainJob
at that field's path; one on the runtime's own fields on the runtime. A runtime no TrainJob of the run
names, and a TrainJob whose runtime is not in the run, are checked on their own as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.trainer_runtimes import (
    RuntimeKey,
    fill_runtime,
    given_path,
    is_trainjob,
    referenced_runtime,
    runtime_key,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.workloads import (
    ObjectRef,
    PodSpecSite,
    join_path,
    object_sites,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.findings import Allowed, Finding

TRAINER_FIELDS = ("trainer",)  # the TrainJob's trainer container fields (workload_kinds.TRAINJOB_TEMPLATES)


@dataclass(frozen=True)
class NamingTrainJob:
    obj: Mapping[str, Any]
    ref: ObjectRef
    prefix: str


@dataclass
class TrainerPairs:
    """What a run read of the Trainer's objects: the TrainJobs by the runtime they name, the runtimes
    present, and the pod specs held until the whole run is read (each with the part its findings go to)."""

    trainjobs: dict[RuntimeKey, list[NamingTrainJob]] = field(default_factory=dict)
    runtimes: set[RuntimeKey] = field(default_factory=set)
    held_runtimes: list[tuple[Any, PodSpecSite, Mapping[str, Any]]] = field(default_factory=list)
    held_trainers: list[tuple[Any, PodSpecSite, RuntimeKey]] = field(default_factory=list)

    def index(self, obj: Any, ref: ObjectRef, prefix: str) -> None:
        """Note a TrainJob by the runtime it names."""
        if isinstance(obj, dict) and is_trainjob(obj):
            key = referenced_runtime(obj)
            if key is not None:
                self.trainjobs.setdefault(key, []).append(NamingTrainJob(obj, ref, prefix))

    def hold(self, part: Any, site: PodSpecSite, obj: Any) -> bool:
        """Hold a runtime's pod spec, or a TrainJob's trainer fields, until every document is read."""
        if not isinstance(obj, dict):
            return False
        key = runtime_key(obj)
        if key is not None:
            self.runtimes.add(key)
            self.held_runtimes.append((part, site, obj))
            return True
        if is_trainjob(obj) and site.single_containers == TRAINER_FIELDS:
            named = referenced_runtime(obj)
            if named is not None:
                self.held_trainers.append((part, site, named))
                return True
        return False

    def held_parts(self) -> list[Any]:
        return [part for part, _site, _obj in self.held_runtimes] + [part for part, _s, _k in self.held_trainers]

    def update(self, later: TrainerPairs) -> None:
        for key, jobs in later.trainjobs.items():
            self.trainjobs.setdefault(key, []).extend(jobs)
        self.runtimes |= later.runtimes
        self.held_runtimes += later.held_runtimes
        self.held_trainers += later.held_trainers


Check = Callable[[PodSpecSite], tuple[list[Finding], list[Allowed]]]


def _below_prefix(path: str, prefix: str) -> str:
    return path[len(prefix) + 1 :] if prefix and path.startswith(prefix + ".") else path


def _on_trainjob(finding: Finding, site: PodSpecSite, given: Mapping[str, str], job: NamingTrainJob) -> Finding:
    source = given_path(_below_prefix(finding.path, site.prefix), given)
    if source is None:
        return finding
    return replace(finding, ref=job.ref, path=join_path(job.prefix, source), line=None)


def _filled_site(
    site: PodSpecSite, runtime: Mapping[str, Any], job: NamingTrainJob
) -> tuple[PodSpecSite | None, dict[str, str]]:
    filled = fill_runtime(runtime, job.obj)
    sites, _skipped = object_sites(filled.runtime, site.ref, site.prefix)
    same = next((s for s in sites if s.path == site.path), None)
    return same, filled.given


def judge_runtime(
    site: PodSpecSite, runtime: Mapping[str, Any], jobs: list[NamingTrainJob], check: Check
) -> tuple[list[Finding], list[Allowed], list[str]]:
    """A runtime's pod spec as each TrainJob fills it: findings (each once), allowed findings and notes."""
    findings: list[Finding] = []
    allowed: list[Allowed] = []
    notes: list[str] = []
    for job in jobs:
        filled, given = _filled_site(site, runtime, job)
        if filled is None:
            continue
        found, let = check(filled)
        findings += [f for f in (_on_trainjob(f, site, given, job) for f in found) if f not in findings]
        for item in let:
            moved = Allowed(_on_trainjob(item.finding, site, given, job), item.reason)
            if moved not in allowed:
                allowed.append(moved)
        notes.append(f"{described(site.ref)}: pod spec at {site.path} checked as {described(job.ref)} fills it")
    return findings, allowed, notes


def described(ref: ObjectRef) -> str:
    name = f"{ref.namespace}/{ref.name}" if ref.namespace else ref.name or "(unnamed)"
    where = f"{ref.source} document {ref.document}" if ref.document is not None else ref.source or "(input)"
    return f"{ref.kind} {name} ({where})"
