# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A validation run over worker processes: each parses and checks a batch of consecutive files;
the batches come back in input order and are merged as a serial run would have read them.

Pod specs whose env may read a ConfigMap or Secret of another file come back unchecked and are
checked here once every batch is in, against the sources of all of them (batches.py).
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.batches import (
    BatchResult,
    compact_scan,
    merge_batch,
    split_batches,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.checker import PodChecker, RuleConfig
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.documents import (
    DocumentScan,
    ValidationResult,
    finish_scan,
    scan_documents,
    validate_documents,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.env import DocumentEnvSources
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.manifests import (
    STDIN_SOURCE,
    ManifestError,
    Manifests,
)

_worker: dict[str, Any] = {}  # the run's settings, in each worker process


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def fork_context() -> Any:
    """Workers are forked: they inherit the loaded collection however it was imported (the command
    line script registers it by hand). Without fork the run stays serial."""
    if "fork" not in multiprocessing.get_all_start_methods():  # pragma: no cover - not Linux
        return None
    return multiprocessing.get_context("fork")


def _init_worker(config: RuleConfig, max_file_size: int, stdin: str | None) -> None:
    _worker.update(config=config, max_file_size=max_file_size, stdin=stdin)


def validate_batch(paths: list[str], config: RuleConfig, max_file_size: int, stdin: str | None) -> BatchResult:
    """Read and check one batch (`stdin`: the text of standard input, read by the parent); the pod
    specs that may need another batch's sources are deferred."""
    manifests = Manifests.of_files(paths, max_file_size)
    if stdin is not None:
        manifests.texts[STDIN_SOURCE] = stdin
    sources = DocumentEnvSources()
    scan = scan_documents(manifests, PodChecker(config, sources), sources)
    return BatchResult(compact_scan(scan), sources, manifests.files, manifests.errors, manifests.spans, manifests.texts)


def _run_batch(paths: list[str]) -> BatchResult:
    return validate_batch(paths, _worker["config"], _worker["max_file_size"], _worker["stdin"])


def _file_size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def parallel_validate(manifests: Manifests, config: RuleConfig, jobs: int) -> ValidationResult:
    """validate_documents(manifests, config) with `jobs` worker processes, the same result in the same
    order; the manifests' files, errors, line spans and texts are filled in as by iterating them."""
    context = fork_context()
    if jobs <= 1 or len(manifests.paths) < 2 or context is None:
        return validate_documents(manifests, config)
    stdin: str | None = None
    if STDIN_SOURCE in manifests.paths:
        try:
            stdin = manifests.read_stdin_text()
        except ManifestError:
            return validate_documents(manifests, config)  # the error is kept: reported in its place
    batches = split_batches(manifests.paths, [_file_size(p) for p in manifests.paths], jobs)
    sources = DocumentEnvSources()
    checker = PodChecker(config, sources)
    scan = DocumentScan()
    with ProcessPoolExecutor(
        max_workers=min(jobs, len(batches)),
        mp_context=context,
        initializer=_init_worker,
        initargs=(config, manifests.max_file_size, stdin),
    ) as pool:
        for batch in pool.map(_run_batch, batches):
            merge_batch(scan, sources, manifests, batch)
    scan_documents(manifests.definition_documents(), checker, sources, scan)
    return finish_scan(scan, checker)
