"""The published DCGM exporter outputs the GPU health code is tested against: each parses as the
Prometheus text format (prometheus_client's parser and promtool's), names its source, and holds the
facts a reader of the exporter relies on (see tests/unit/fixtures/dcgm/README.md)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu import dcgm_signals
from tests.dcgm_fixtures import FIXTURES, SOURCE_PREFIXES, load, names, raw, series, source_lines

ALL = names()
PROMTOOL = shutil.which("promtool")
GPU_PREFIXES = ("DCGM_FI_DEV_", "DCGM_FI_PROF_")
# Per fixture, the label that names the GPU's node; None where the published text names none.
HOST_LABEL = {
    "exporter-readme-quickstart": None,
    "exporter-test-4.5.3-Hostname": "Hostname",
    "exporter-test-head-hostname": "hostname",
    "issue-a100-mig-whole-card": "Hostname",
    "issue-h100-mig-pods": "Hostname",
    "lke-rtx4000-pod-mapping": "Hostname",
    "nvidia-docs-a100-mig": "Hostname",
    "pr-xid-count-injected": "Hostname",
}
POD_LABELS = ("container", "namespace", "pod")


def values(name: str, metric: str) -> list[float]:
    return [value for m, _labels, value in series(name) if m == metric]


def test_the_fixtures_are_the_documented_ones():
    assert sorted(HOST_LABEL) == ALL
    readme = (FIXTURES / "README.md").read_text(encoding="utf-8")
    for name in ALL:
        assert f"`{name}.prom`" in readme, name


@pytest.mark.parametrize("name", ALL)
def test_each_fixture_names_its_source(name):
    lines = source_lines(name)
    assert lines[0].startswith("# source: https://github.com/"), lines[:1]
    for prefix in ("# commit/date:", "# shows:", "# cut:"):
        assert any(line.startswith(prefix) for line in lines), (name, prefix)
    # The source lines are comments to every parser: none of them is a HELP or TYPE line.
    assert not any(line.startswith(("# HELP", "# TYPE")) for line in lines)
    assert load(name).strip() and not any(line.startswith(SOURCE_PREFIXES) for line in load(name).splitlines())


@pytest.mark.parametrize("name", ALL)
def test_each_fixture_parses_whole_and_without_its_source_lines(name):
    for text in (raw(name), load(name)):
        families = list(text_string_to_metric_families(text))
        assert families and all(family.samples or family.documentation for family in families)
    assert series(name)


@pytest.mark.parametrize("name", ALL)
def test_every_gpu_series_has_its_gpu_index_and_uuid(name):
    gpu_series = [(m, labels) for m, labels, _v in series(name) if m.startswith(GPU_PREFIXES)]
    for metric, labels in gpu_series:
        assert labels.get(dcgm_signals.GPU_LABEL, "").isdigit(), (metric, labels)
        assert labels.get(dcgm_signals.UUID_LABEL, "").startswith("GPU-"), (metric, labels)


@pytest.mark.parametrize("name", ALL)
def test_a_fixture_naming_a_host_uses_the_exporters_host_label(name):
    host_labels = dcgm_signals.NODE_LABELS[:2]
    for _metric, labels, _value in series(name):
        present = [label for label in host_labels if label in labels]
        expected = HOST_LABEL[name]
        assert present == ([expected] if expected else []), (name, labels)


def test_the_rename_changed_only_the_host_label():
    before = series("exporter-test-4.5.3-Hostname")
    after = series("exporter-test-head-hostname")
    assert [(m, v) for m, _l, v in before] == [(m, v) for m, _l, v in after]
    renamed = [{("hostname" if k == "Hostname" else k): v for k, v in labels.items()} for _m, labels, _v in before]
    assert renamed == [labels for _m, labels, _v in after]
    assert after[0][1]["hostname"] == "testhost"


def test_the_windowed_xid_count_carries_the_injected_nonzero_xid():
    (metric, labels, value), *rest = series("pr-xid-count-injected")
    assert not rest
    assert labels[dcgm_signals.XID_LABEL] == "42" and int(labels[dcgm_signals.XID_LABEL]) != 0
    assert value == 1
    assert labels["window_size_in_ms"] == "300000"
    # As published, the sample's name is not the one its HELP/TYPE lines (and the released exporter) give.
    assert metric == "DCGM_FI_DEV_XID_ERRORS_ACTIVE"
    family_names = [family.name for family in text_string_to_metric_families(load("pr-xid-count-injected"))]
    assert dcgm_signals.XID_COUNT_SIGNAL.metric in family_names


def test_no_published_last_xid_gauge_here_is_nonzero():
    """The last-XID gauge appears in two fixtures, at 0 on every GPU and MIG instance; the one nonzero
    XID published is the injected one of the windowed count."""
    xid = "DCGM_FI_DEV_XID_ERRORS"
    assert values("lke-rtx4000-pod-mapping", xid) == [0]
    assert values("nvidia-docs-a100-mig", xid) == [0, 0]
    (labels,) = [labels for m, labels, _v in series("lke-rtx4000-pod-mapping") if m == xid]
    assert (labels["err_code"], labels["err_msg"]) == ("0", "No Error")


def test_the_gpu_operator_defaults_collect_the_default_on_signals_and_only_those():
    collected = {metric for metric, _labels, _value in series("lke-rtx4000-pod-mapping")}
    assert dcgm_signals.PRESENCE_METRIC in collected
    for signal in dcgm_signals.METRIC_SIGNALS:
        assert (signal.metric in collected) == signal.default_on, signal.metric
    assert dcgm_signals.XID_COUNT_SIGNAL.metric not in collected


def test_remapped_rows_and_row_remap_failure_are_published_at_zero():
    name = "lke-rtx4000-pod-mapping"
    assert values(name, "DCGM_FI_DEV_ROW_REMAP_FAILURE") == [0]
    assert values(name, "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS") == [0]
    assert values(name, "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS") == [0]


def test_counters_keep_their_published_names():
    collected = [metric for metric, _labels, _value in series("lke-rtx4000-pod-mapping")]
    assert "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS" in collected
    assert not any(metric.endswith("_total") for metric in collected)


def test_pod_mapping_labels_name_the_pod_holding_the_gpu():
    for _metric, labels, _value in series("lke-rtx4000-pod-mapping"):
        assert (labels["namespace"], labels["pod"], labels["container"]) == (
            "default",
            "cuda-75454ffb9f-8ljq7",
            "cuda",
        )
        assert labels["pod_uid"] == ""
    # A MIG instance no pod holds: the labels are there but empty ...
    ((_m, labels, _v),) = series("issue-a100-mig-whole-card")
    assert [labels[label] for label in POD_LABELS] == ["", "", ""]
    # ... or, in another exporter build, absent.
    by_instance = {labels["GPU_I_ID"]: labels for _m, labels, _v in series("issue-h100-mig-pods")}
    assert not any(label in by_instance["8"] for label in POD_LABELS)
    assert by_instance["7"]["namespace"] == by_instance["9"]["namespace"] == "model-playground-stg"


@pytest.mark.parametrize("name", ["nvidia-docs-a100-mig", "issue-h100-mig-pods", "issue-a100-mig-whole-card"])
def test_mig_instances_carry_their_profile_and_the_parent_gpu(name):
    mig = [labels for _m, labels, _v in series(name) if "GPU_I_ID" in labels]
    assert mig
    for labels in mig:
        assert labels["GPU_I_PROFILE"] and labels["GPU_I_ID"].isdigit()
    whole = [labels for _m, labels, _v in series(name) if "GPU_I_ID" not in labels]
    # A MIG instance's series name the parent GPU: its index and UUID are those of the whole GPU.
    assert {(labels["gpu"], labels["UUID"]) for labels in mig + whole} == {(mig[0]["gpu"], mig[0]["UUID"])}


def test_a_blank_dcgm_value_is_published_as_a_huge_number():
    (temperature,) = values("exporter-readme-quickstart", "DCGM_FI_DEV_MEMORY_TEMP")
    assert temperature == float(9223372036854775794)


@pytest.mark.skipif(PROMTOOL is None, reason="promtool (Debian's prometheus package) is not installed")
@pytest.mark.parametrize("name", ALL)
def test_promtool_parses_each_fixture(name):
    """promtool check metrics exits 1 on a text it cannot parse and 3 when it only lints (the
    exporter's names break its conventions: camelCase labels, counters without _total)."""
    assert PROMTOOL is not None
    done = subprocess.run(
        [PROMTOOL, "check", "metrics"], input=raw(name), capture_output=True, text=True, timeout=60, check=False
    )
    output = done.stdout + done.stderr
    assert done.returncode in (0, 3), output
    assert "error while linting" not in output and "parsing error" not in output, output
