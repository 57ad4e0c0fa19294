"""The alert rules as the signal table makes them: every XID of the failed class in a page rule, no workload
XID anywhere, every rule with its node label, its `for`, its tier and its runbook; the durations checked."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from ansible_collections.kubegpu.scheduling.plugins.module_utils.alert_rules import render
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu import dcgm_promql
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dcgm_signals import (
    METRIC_SIGNALS,
    NODE_LABELS,
    WORKLOAD,
    XID_TABLE,
    xids_of,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.health_table import DEGRADED, FAILED
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.modules import gpu_alert_rules

GROUPS = render.rule_groups(render.AlertSettings())
RULES = [r for group in GROUPS for r in group["rules"]]
BY_NAME = {r["alert"]: r for r in RULES}
XID_METRIC = "DCGM_FI_DEV_XID_ERRORS"
REPO = Path(__file__).resolve().parents[5]


def compared_codes(expr: str) -> set[int]:
    """The XID codes an expression compares the last-XID gauge (per GPU) with, by == or !=."""
    return {int(code) for code in re.findall(rf"{XID_METRIC}(?: != 0)?\) [!=]= (\d+)", expr)}


def tier(name: str) -> str:
    return next(group["name"] for group in GROUPS for r in group["rules"] if r["alert"] == name)


def test_two_groups_page_then_ticket_and_each_rule_in_the_group_of_its_tier():
    assert [g["name"] for g in GROUPS] == ["kubegpu-gpu-page", "kubegpu-gpu-ticket"]
    for group, expected in zip(GROUPS, (("page", "critical"), ("ticket", "warning")), strict=True):
        assert group["rules"]
        for r in group["rules"]:
            assert (r["labels"]["tier"], r["labels"]["severity"]) == expected, r["alert"]
    assert len(BY_NAME) == len(RULES), "alert names are unique"


def test_every_failed_class_xid_is_in_a_page_rule_and_degraded_in_a_ticket_rule():
    assert compared_codes(BY_NAME["GpuXidFailed"]["expr"]) == set(xids_of(FAILED))
    assert tier("GpuXidFailed") == "kubegpu-gpu-page"
    assert compared_codes(BY_NAME["GpuXidDegraded"]["expr"]) == set(xids_of(DEGRADED))
    assert tier("GpuXidDegraded") == "kubegpu-gpu-ticket"
    # An XID outside the table: every code of the table (and 0, before the grouping) is left out, and it opens a ticket.
    assert compared_codes(BY_NAME["GpuXidUnlisted"]["expr"]) == set(XID_TABLE)
    assert f"({XID_METRIC} != 0) != {min(XID_TABLE)} and" in BY_NAME["GpuXidUnlisted"]["expr"]
    assert tier("GpuXidUnlisted") == "kubegpu-gpu-ticket"


def test_no_workload_xid_alerts_anywhere():
    workload = set(xids_of(WORKLOAD))
    assert workload == {13, 31, 43, 45, 68}
    for r in RULES:
        selected = {int(c) for c in re.findall(rf"{XID_METRIC}(?: != 0)?\) == (\d+)", r["expr"])}
        assert not selected & workload, r["alert"]
        excluded = {int(c) for c in re.findall(rf"{XID_METRIC}(?: != 0)?\) != (\d+)", r["expr"])}
        assert workload <= excluded or not excluded, r["alert"]


def test_the_xid_rules_judge_a_change_within_the_window_never_the_value_alone():
    for name in ("GpuXidFailed", "GpuXidDegraded", "GpuXidUnlisted"):
        expr = BY_NAME[name]["expr"]
        # The GPU's XID now, unless it was the same a window ago (none then reads as 0), never the value alone.
        now, before = rf"max by \([^)]*\) \({XID_METRIC} != 0\)", rf"max by \([^)]*\) \({XID_METRIC} offset 30m != 0\)"
        assert re.search(rf"unless on \([^)]*\) \({now} == on \([^)]*\) {before}\)", expr), name


def test_every_signal_of_the_table_has_a_rule_of_its_status():
    for signal in METRIC_SIGNALS:
        found = [r for r in RULES if signal.metric in r["expr"]]
        assert found, signal.metric
        if signal.status is not None:
            assert {r["labels"]["status"] for r in found} == {signal.status}, signal.metric
            assert {r["labels"]["kind"] for r in found} == {signal.kind}, signal.metric
    assert tier("GpuEccDbeVolTotalIncreased") == "kubegpu-gpu-page"
    assert tier("GpuRowRemapFailure") == "kubegpu-gpu-page"
    assert tier("GpuUncorrectableRemappedRowsIncreased") == "kubegpu-gpu-ticket"
    assert tier("GpuRowRemapPending") == "kubegpu-gpu-ticket"
    assert tier("GpuRetiredPending") == "kubegpu-gpu-ticket"
    ecc = BY_NAME["GpuEccDbeVolTotalIncreased"]["expr"]
    ecc_now, ecc_before = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL > 0)", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL offset 30m)"
    by = r"max by \([^)]*\) \("
    assert re.search(rf"{by}{re.escape(ecc_now)} - on \([^)]*\) {by}{re.escape(ecc_before)} > 0", ecc)


def test_every_rule_has_the_node_label_for_runbook_and_annotations():
    for r in RULES:
        assert re.search(r"\b(max|count) by \(node\b", r["expr"]), r["alert"]
        for label in NODE_LABELS:
            if label != "node":
                assert f'"node", "$1", "{label}", "(.+)"' in r["expr"], (r["alert"], label)
        assert r["for"] in ("2m", "15m", "10m"), r["alert"]
        assert set(r["labels"]) == {"severity", "tier", "status", "kind"}, r["alert"]
        assert r["annotations"]["runbook_url"] == (
            "https://github.com/kubegpu/scheduling/blob/main/docs/runbooks/gpu-failure.md"
        )
        assert "{{ $labels.node }}" in r["annotations"]["summary"], r["alert"]
        assert "{{ $value" in r["annotations"]["description"], r["alert"]
    assert BY_NAME["GpuExporterAbsent"]["for"] == "10m"


def test_the_runbook_base_is_the_collections_repository_and_an_option():
    galaxy = yaml.safe_load((REPO / "galaxy.yml").read_text())
    assert f"{galaxy['repository']}/blob/main/docs/runbooks" == render.DEFAULT_RUNBOOK_BASE_URL
    groups = render.rule_groups(render.AlertSettings(runbook_base_url="https://wiki.example.com/gpu/"))
    urls = {r["annotations"]["runbook_url"] for g in groups for r in g["rules"]}
    assert urls == {"https://wiki.example.com/gpu/gpu-failure.md"}


def test_the_exporter_absent_rule_is_guarded_by_gpu_capacity():
    expr = BY_NAME["GpuExporterAbsent"]["expr"]
    assert expr.startswith(
        '(max by (node) (kube_node_status_capacity{resource="nvidia_com_gpu"}) > 0) unless on (node)'
    )
    assert BY_NAME["GpuExporterAbsent"]["labels"] == {
        "severity": "critical",
        "tier": "page",
        "status": "unknown",
        "kind": "gpu_metrics_unknown",
    }


def test_the_gpu_count_is_compared_with_itself_over_the_lookback():
    expr = BY_NAME["GpuCountDropped"]["expr"]
    assert dcgm_promql.gpu_count_expr() in expr and "max_over_time((" in expr and "[1h:1m])" in expr
    assert "allocatable" not in expr


def test_durations_are_taken_as_prometheus_writes_them():
    assert render.duration_ms("1h30m", "window") == 5_400_000
    assert render.duration_ms("90s", "window") == 90_000
    for bad in ("", "15", "1.5h", "m", "15 m"):
        with pytest.raises(OptionError, match="window must be a Prometheus duration"):
            render.duration_ms(bad, "window")


def test_a_window_no_longer_than_a_for_is_refused_naming_both():
    with pytest.raises(OptionError, match=r"window \(10m\) must be longer than ticket_for \(15m\)"):
        render.rule_groups(render.AlertSettings(window="10m"))
    with pytest.raises(OptionError, match=r"count_lookback \(1m\) must be longer than page_for \(2m\)"):
        render.rule_groups(render.AlertSettings(count_lookback="1m"))
    with pytest.raises(OptionError, match="absent_for must be a Prometheus duration"):
        render.rule_groups(render.AlertSettings(absent_for="soon"))


def test_the_prometheus_rule_carries_the_labels_and_the_groups():
    obj = render.prometheus_rule(render.AlertSettings(), "gpu", "monitoring", {"release": "kps"})
    assert obj["apiVersion"] == "monitoring.coreos.com/v1" and obj["kind"] == "PrometheusRule"
    assert obj["metadata"] == {"name": "gpu", "namespace": "monitoring", "labels": {"release": "kps"}}
    assert obj["spec"] == {"groups": GROUPS}


def test_the_module_docs_name_the_xid_classes_of_the_table():
    description = " ".join(yaml.safe_load(gpu_alert_rules.DOCUMENTATION)["description"])
    for status in (FAILED, DEGRADED, WORKLOAD):
        assert "(" + ", ".join(str(c) for c in xids_of(status)) + ")" in description, status


def test_the_node_label_helper_prefers_the_exporters_own_label():
    expr = dcgm_promql.with_node_label("m")
    assert expr == (
        'label_replace(label_replace(label_replace(m, "node", "$1", "kubernetes_node", "(.+)"), '
        '"node", "$1", "hostname", "(.+)"), "node", "$1", "Hostname", "(.+)")'
    )


def test_the_docs_page_names_every_alert_and_the_lines_of_the_counters_off_by_default():
    text = (REPO / "docs" / "alert-rules.md").read_text()
    for name in BY_NAME:
        assert f"| `{name}` | {BY_NAME[name]['labels']['tier']} |" in text, name
    for signal in METRIC_SIGNALS:
        assert (signal.csv_line in text) is (not signal.default_on), signal.metric
    for status in (FAILED, DEGRADED, WORKLOAD):
        assert ", ".join(str(c) for c in xids_of(status)) in text, status
