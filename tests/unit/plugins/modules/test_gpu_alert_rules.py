"""gpu_alert_rules with dest: the file written only when absent or the module's own, only when its text
changes, never in check mode; someone else's file refused untouched and left alone on removal."""

from __future__ import annotations

import json

import pytest
import yaml

from ansible_collections.kubegpu.scheduling.plugins.module_utils.alert_rules import render
from ansible_collections.kubegpu.scheduling.plugins.module_utils.alert_rules.run import HEADER
from ansible_collections.kubegpu.scheduling.plugins.modules import gpu_alert_rules
from tests.module_args import patch_module_args


def run_module(capsys, **args):
    with patch_module_args(args), pytest.raises(SystemExit):
        gpu_alert_rules.main()
    return json.loads(capsys.readouterr().out)


def test_writes_the_rules_file_once_then_nothing(tmp_path, capsys):
    dest = tmp_path / "rules" / "gpu.yml"
    checked = run_module(capsys, dest=str(dest), _ansible_check_mode=True, _ansible_diff=True)
    assert checked["changed"] is True and not dest.exists()
    assert checked["diff"][0]["before"] == "" and checked["diff"][0]["after"].startswith(HEADER)

    first = run_module(capsys, dest=str(dest))
    assert first["changed"] is True and first["changes"] == [str(dest)]
    assert (first["writes"], first["api_requests"]) == (0, 0)
    text = dest.read_text()
    assert text.splitlines()[0] == HEADER
    assert yaml.safe_load(text) == render.rules_file(render.AlertSettings())
    assert first["alerts"][0] == "GpuXidFailed" and first["dest"] == str(dest)
    stamp = dest.stat().st_mtime_ns

    again = run_module(capsys, dest=str(dest))
    assert again["changed"] is False and again["changes"] == []
    assert dest.stat().st_mtime_ns == stamp

    changed = run_module(capsys, dest=str(dest), window="1h", _ansible_diff=True)
    assert changed["changed"] is True and "offset 1h)" in dest.read_text() and "offset 30m)" not in dest.read_text()
    assert "offset 30m)" in changed["diff"][0]["before"]


def test_the_prometheus_rule_format_carries_the_mark_and_labels(tmp_path, capsys):
    dest = tmp_path / "gpu.yaml"
    run_module(capsys, dest=str(dest), format="prometheus_rule", labels={"release": "kps"}, namespace="mon")
    obj = yaml.safe_load(dest.read_text())
    assert obj["kind"] == "PrometheusRule" and obj["metadata"]["namespace"] == "mon"
    assert obj["metadata"]["labels"] == {"release": "kps", "app.kubernetes.io/managed-by": "kubegpu.scheduling"}


def test_someone_elses_file_is_refused_untouched_and_left_alone_on_removal(tmp_path, capsys):
    dest = tmp_path / "gpu.yml"
    dest.write_text("groups: []\n")
    failed = run_module(capsys, dest=str(dest))
    assert failed["failed"] is True and failed["not_ours"] == [str(dest)]
    assert "was not written by gpu_alert_rules" in failed["msg"] and "nothing was written" in failed["msg"]
    assert dest.read_text() == "groups: []\n"
    removed = run_module(capsys, dest=str(dest), state="absent")
    assert removed["changed"] is False and removed["left_alone"] == [str(dest)]
    assert dest.read_text() == "groups: []\n"


def test_removal_deletes_only_its_own_file(tmp_path, capsys):
    dest = tmp_path / "gpu.yml"
    run_module(capsys, dest=str(dest))
    checked = run_module(capsys, dest=str(dest), state="absent", _ansible_check_mode=True)
    assert checked["changed"] is True and dest.exists()
    removed = run_module(capsys, dest=str(dest), state="absent")
    assert removed["changed"] is True and removed["changes"] == [str(dest)] and not dest.exists()
    assert run_module(capsys, dest=str(dest), state="absent")["changed"] is False


def test_a_bad_duration_fails_naming_the_option(tmp_path, capsys):
    failed = run_module(capsys, dest=str(tmp_path / "gpu.yml"), page_for="2 minutes")
    assert failed["failed"] is True and "page_for must be a Prometheus duration" in failed["msg"]
    assert not (tmp_path / "gpu.yml").exists()
