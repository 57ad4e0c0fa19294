# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pure side of a parallel validation run: how many workers, the input split into batches of
consecutive files, and the batches' results merged back in input order, exactly as a serial run
reads them (see parallel.py for the process pool)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.documents import (
    DocumentScan,
    ValidationResult,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.env import DocumentEnvSources
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.manifests import LoadError, Manifests

# From this many files on, a run without a --jobs choice uses every CPU: below it, starting the
# workers costs more than it saves.
MANY_FILES = 16
# Batches per worker: a worker that draws a slow batch is made up for by the others.
BATCHES_PER_JOB = 4


def default_jobs(files: int, cpus: int) -> int:
    return max(1, cpus) if files >= MANY_FILES else 1


def split_batches(paths: Sequence[str], sizes: Sequence[int], jobs: int) -> list[list[str]]:
    """Consecutive runs of the paths, about equal in bytes, BATCHES_PER_JOB per job at most.

    Consecutive, so that concatenating the batches' results gives the input order back.
    """
    if not paths:
        return []
    count = max(1, min(len(paths), jobs * BATCHES_PER_JOB))
    total = sum(max(size, 1) for size in sizes)
    batches: list[list[str]] = [[]]
    done = 0
    for path, size in zip(paths, sizes, strict=True):
        # A new batch once the ones before have their share of the bytes.
        if batches[-1] and done >= total * len(batches) / count and len(batches) < count:
            batches.append([])
        batches[-1].append(path)
        done += max(size, 1)
    return batches


@dataclass
class BatchResult:
    """What a worker read of one batch: its pod specs checked or deferred, its ConfigMaps and
    Secrets, and what the batch's Manifests recorded."""

    scan: DocumentScan
    sources: DocumentEnvSources
    files: list[str] = field(default_factory=list)
    errors: list[LoadError] = field(default_factory=list)
    spans: dict[tuple[str, int], tuple[int, int | None]] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)


def compact_scan(scan: DocumentScan) -> DocumentScan:
    """The scan without the parts that hold nothing and wait for nothing: less to send back."""
    waiting = {id(part) for part, _site in scan.deferred} | {id(part) for part in scan.trainer.held_parts()}
    parts = [p for p in scan.parts if p.findings or p.allowed or id(p) in waiting]
    return DocumentScan(scan.result, parts, scan.deferred, scan.trainer)


def merge_batch(into: DocumentScan, sources: DocumentEnvSources, manifests: Manifests, batch: BatchResult) -> None:
    """Append a batch that follows everything merged so far, as if its documents were read here."""
    result: ValidationResult = batch.scan.result
    into.result.extend(result)
    into.parts += batch.scan.parts
    into.deferred += batch.scan.deferred
    into.trainer.update(batch.scan.trainer)
    sources.update(batch.sources)
    manifests.files += batch.files
    manifests.errors += batch.errors
    manifests.spans.update(batch.spans)
    manifests.texts.update(batch.texts)
