"""The pure pieces of a parallel run: worker count, batches of consecutive files, the merge."""

from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.batches import (
    BATCHES_PER_JOB,
    MANY_FILES,
    BatchResult,
    compact_scan,
    default_jobs,
    merge_batch,
    split_batches,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.checker import PodChecker, RuleConfig
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.documents import (
    DocumentScan,
    finish_scan,
    scan_documents,
    validate_documents,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.env import DocumentEnvSources
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.manifests import Document, Manifests


def test_many_files_use_every_cpu_few_files_one():
    assert default_jobs(MANY_FILES, 8) == 8
    assert default_jobs(MANY_FILES - 1, 8) == 1
    assert default_jobs(1000, 0) == 1


def test_batches_are_consecutive_cover_every_path_once_and_are_about_equal_in_bytes():
    paths = [f"f{i}" for i in range(40)]
    sizes = [1000] * 20 + [10] * 20
    batches = split_batches(paths, sizes, jobs=2)
    assert [p for batch in batches for p in batch] == paths
    assert len(batches) <= 2 * BATCHES_PER_JOB
    big = [sum(sizes[paths.index(p)] for p in batch) for batch in batches]
    assert max(big) <= 2 * sum(sizes) / len(batches)


def test_fewer_paths_than_batches_and_none():
    assert split_batches(["a", "b"], [5, 5], jobs=4) == [["a"], ["b"]]
    assert split_batches(["a"], [0], jobs=2) == [["a"]]
    assert split_batches([], [], jobs=2) == []


def configmap(name, value):
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ns"},
        "data": {"S": value},
    }


def deployment(name):
    """Reads NVIDIA_VISIBLE_DEVICES from ConfigMap `gpu` (key S, prefix NVIDIA_VISIBLE_DEVICE): waits for every source."""
    container = {
        "name": "main",
        "image": "app:1",
        "envFrom": [{"prefix": "NVIDIA_VISIBLE_DEVICE", "configMapRef": {"name": "gpu"}}],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"template": {"spec": {"containers": [container]}}},
    }


def privileged(name):
    """Checked at once: nothing in its env can come from a ConfigMap."""
    spec = {"containers": [{"name": "main", "image": "app:1", "securityContext": {"privileged": True}}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns"}, "spec": spec}


def batch_of(source, objects):
    sources = DocumentEnvSources()
    documents = [Document(source, i, obj, i + 1) for i, obj in enumerate(objects)]
    scan = scan_documents(documents, PodChecker(RuleConfig(), sources), sources)
    return BatchResult(compact_scan(scan), sources, [source])


def test_merged_batches_give_the_serial_result_with_sources_from_later_files():
    # The deployment in the first file reads a ConfigMap of the last file; a later ConfigMap of the
    # same name wins, as in a serial run.
    files = [
        ("a.yaml", [deployment("reads-later"), privileged("first")]),
        ("b.yaml", [configmap("gpu", "void"), privileged("second")]),
        ("c.yaml", [configmap("gpu", "all")]),
    ]
    serial = validate_documents(
        [Document(source, i, obj, i + 1) for source, objects in files for i, obj in enumerate(objects)], RuleConfig()
    )
    sources = DocumentEnvSources()
    checker = PodChecker(RuleConfig(), sources)
    scan = DocumentScan()
    manifests = Manifests.of_files([], 1000)
    for source, objects in files:
        merge_batch(scan, sources, manifests, batch_of(source, objects))
    merged = finish_scan(scan, checker)
    assert [(f.ref.name, f.rule) for f in merged.findings] == [
        ("reads-later", "KGPU101"),
        ("first", "KGPU302"),
        ("second", "KGPU302"),
    ]
    assert merged == serial
    assert manifests.files == ["a.yaml", "b.yaml", "c.yaml"]


def test_compact_scan_keeps_parts_with_findings_or_waiting_in_order():
    result = batch_of(
        "a.yaml",
        [
            privileged("x"),
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "ok"},
                "spec": {"containers": [{"name": "m", "image": "a"}]},
            },
            deployment("d"),
        ],
    )
    assert len(result.scan.parts) == 2
    assert len(result.scan.deferred) == 1 and result.scan.parts[1] is result.scan.deferred[0][0]
