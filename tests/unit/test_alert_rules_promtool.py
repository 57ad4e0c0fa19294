"""The alert rules rendered from the DCGM signal table, judged by Prometheus' own `promtool`: `check rules`
accepts them, and `test rules` evaluates them over series made here. A critical XID (0, then 79) fires once
its `for` has passed, also where the exporter starts a new series for the new XID (its `err_code` label); a
workload XID (0, then 13) and an XID of last month (79 the whole time, across an exporter restart) never do; an
uncorrectable ECC increase and a GPU that leaves the exporter fire; the exporter's absence fires only for a
node whose kube-state-metrics capacity has GPUs, and nothing fires on a cluster without GPU nodes.

The node is named by each label the exporter or a scrape config may give it (`Hostname`, `hostname`,
`kubernetes_node`), and every alert carries it as `node`. The expected annotations are the rules' own
templates, filled in with the alert's labels and value."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.kubegpu.scheduling.plugins.module_utils.alert_rules import render
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu import dcgm_promql as promql

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
SETTINGS = render.AlertSettings()
RULES = render.rules_file(SETTINGS)
BY_NAME = {r["alert"]: r for group in RULES["groups"] for r in group["rules"]}

pytestmark = pytest.mark.skipif(not Path(PROMTOOL).exists(), reason="promtool is not installed")


def gpu(node_label: str, node: str, index: int, model: str = "NVIDIA H100 80GB HBM3") -> dict[str, str]:
    return {node_label: node, "gpu": str(index), "UUID": f"GPU-{node}-{index}", "modelName": model}


def series(metric: str, labels: dict[str, str], values: str) -> dict[str, str]:
    inner = ", ".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{metric}{{{inner}}}", "values": values}


def filled(template: str, labels: dict[str, str], value: float) -> str:
    """A rule's annotation template as Prometheus fills it for an alert of these labels and this value."""
    shown = f"{value:g}"
    text = re.sub(r"\{\{ \$value \| humanize \}\}", shown, template)
    text = text.replace("{{ $value }}", shown)
    return re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m[1], ""), text)


def alert(name: str, value: float, **labels: str) -> dict[str, Any]:
    """An expected alert: the rule's labels, the series' labels, and the annotations filled in."""
    rule = BY_NAME[name]
    every = {**labels, **rule["labels"]}
    annotations = {k: filled(v, every, value) for k, v in rule["annotations"].items()}
    return {"exp_labels": every, "exp_annotations": annotations}


def on_gpu(node: str, index: int, model: str = "NVIDIA H100 80GB HBM3") -> dict[str, str]:
    return {"node": node, "gpu": str(index), "UUID": f"GPU-{node}-{index}", "modelName": model}


def check(at: str, name: str, *alerts: dict[str, Any]) -> dict[str, Any]:
    return {"eval_time": at, "alertname": name, "exp_alerts": list(alerts)}


XID = "DCGM_FI_DEV_XID_ERRORS"
ECC = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
TEMP = "DCGM_FI_DEV_GPU_TEMP"
CAPACITY = "kube_node_status_capacity"


def gpu_cluster() -> dict[str, Any]:
    """A cluster with GPU nodes: each fault on a node of its own, named by a different label. Faults come
    after 50 minutes of history, more than the window (30m), as on a Prometheus that has run for a while."""
    input_series = [
        # gpu-a: XID 79 (failed class) at minute 51.
        series(XID, gpu("Hostname", "gpu-a", 0), "0x50 79x50"),
        # gpu-b: XID 13 (workload class) at minute 51.
        series(XID, gpu("hostname", "gpu-b", 0), "0x50 13x50"),
        # gpu-c: XID 79 from long before: the gauge never resets.
        series(XID, gpu("Hostname", "gpu-c", 0), "79x100"),
        # gpu-g: the exporter labels each XID's series with its code: XID 79 at minute 51 starts a new series.
        series(XID, {**gpu("Hostname", "gpu-g", 2), "err_code": "0"}, "0x50"),
        series(XID, {**gpu("Hostname", "gpu-g", 2), "err_code": "79"}, "_x51 79x49"),
        # gpu-h: XID 79 of last month, its series moving to a new pod when the exporter restarts at minute 60.
        series(XID, {**gpu("Hostname", "gpu-h", 0), "pod": "dcgm-exporter-a"}, "79x60"),
        series(XID, {**gpu("Hostname", "gpu-h", 0), "pod": "dcgm-exporter-b"}, "_x61 79x39"),
        # gpu-d: one uncorrectable (double-bit) ECC error at minute 71.
        series(ECC, gpu("hostname", "gpu-d", 1), "0x70 1x30"),
        # gpu-e: four GPUs, one of which leaves the exporter after minute 60.
        *(series(TEMP, gpu("kubernetes_node", "gpu-e", i), "40x100") for i in range(3)),
        series(TEMP, gpu("kubernetes_node", "gpu-e", 3), "40x60"),
        # kube-state-metrics: gpu-e (exporter present), gpu-f (no exporter), cpu-1 (no GPU).
        series(CAPACITY, {"node": "gpu-e", "resource": "nvidia_com_gpu", "unit": "integer"}, "4x100"),
        series(CAPACITY, {"node": "gpu-f", "resource": "nvidia_com_gpu", "unit": "integer"}, "8x100"),
        series(CAPACITY, {"node": "cpu-1", "resource": "nvidia_com_gpu", "unit": "integer"}, "0x100"),
        series(CAPACITY, {"node": "cpu-1", "resource": "cpu", "unit": "core"}, "16x100"),
    ]
    failed_a = alert("GpuXidFailed", 79, **on_gpu("gpu-a", 0))
    failed_g = alert("GpuXidFailed", 79, **on_gpu("gpu-g", 2))
    tests = [
        # Pending for its `for` (2m) first, then firing; gpu-c's and gpu-h's month-old 79 never.
        check("52m", "GpuXidFailed"),
        check("55m", "GpuXidFailed", failed_a, failed_g),
        check("70m", "GpuXidFailed", failed_a, failed_g),
        check("80m", "GpuXidFailed", failed_a, failed_g),
        # Past the window (30m) after the change, it resolves.
        check("85m", "GpuXidFailed"),
        # A workload XID opens nothing, in no tier.
        *(check(at, name) for at in ("55m", "70m") for name in ("GpuXidDegraded", "GpuXidUnlisted")),
        check("70m", "GpuEccDbeVolTotalIncreased"),
        check("85m", "GpuEccDbeVolTotalIncreased", alert("GpuEccDbeVolTotalIncreased", 1, **on_gpu("gpu-d", 1))),
        check("55m", "GpuCountDropped"),
        check("75m", "GpuCountDropped", alert("GpuCountDropped", 3, node="gpu-e")),
        # Absent after its own `for` (10m), only where the capacity has GPUs and the exporter has no series.
        check("5m", "GpuExporterAbsent"),
        check("15m", "GpuExporterAbsent", alert("GpuExporterAbsent", 8, node="gpu-f")),
    ]
    return {"interval": "1m", "input_series": input_series, "alert_rule_test": tests}


def cluster_without_gpus() -> dict[str, Any]:
    """No GPU node and no exporter: nothing fires, whatever the time."""
    input_series = [
        series(CAPACITY, {"node": "cpu-1", "resource": "cpu", "unit": "core"}, "16x100"),
        series(CAPACITY, {"node": "cpu-2", "resource": "nvidia_com_gpu", "unit": "integer"}, "0x100"),
    ]
    tests = [check(at, name) for at in ("15m", "45m") for name in BY_NAME]
    return {"interval": "1m", "input_series": input_series, "alert_rule_test": tests}


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture()
def rules_file(tmp_path: Path) -> Path:
    path = tmp_path / "gpu-alerts.yml"
    path.write_text(yaml.safe_dump(RULES, sort_keys=False, width=1000))
    return path


def test_promtool_accepts_the_rules(rules_file: Path):
    done = promtool("check", "rules", str(rules_file), cwd=rules_file.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(BY_NAME)} rules found" in done.stdout


@pytest.mark.parametrize("cluster", [gpu_cluster, cluster_without_gpus], ids=lambda f: f.__name__)
def test_the_rules_fire_on_gpu_faults_only(rules_file: Path, cluster):
    test_file = rules_file.parent / "test.yml"
    document = {"rule_files": [rules_file.name], "evaluation_interval": "1m", "tests": [cluster()]}
    test_file.write_text(yaml.safe_dump(document, sort_keys=False, width=1000))
    done = promtool("test", "rules", test_file.name, cwd=rules_file.parent)
    assert done.returncode == 0, done.stdout + done.stderr


# --- the recording rules the facts' read takes (prometheus.recorded) ---------------------------------------

RECORD_WINDOW = "30m"
RECORDS = render.rules_file(render.AlertSettings(record_window=RECORD_WINDOW))


def none_apart(left: str, right: str) -> str:
    """0 when every series of `left` has one of `right` with the same labels (the window label aside)."""
    return f"count(({left}) unless ignoring ({promql.WINDOW_LABEL}) ({right})) or vector(0)"


def recorded_as_read() -> dict[str, Any]:
    """Over the GPU cluster's series, the recorded signals, GPU counts and sample ages are what the
    facts' own queries answer at the same instant, both ways, and the signals are the faults."""
    kept = promql.recorded(promql.RECORDED_SIGNALS, RECORD_WINDOW)
    live = promql.signals_expr(RECORD_WINDOW)
    gpus_kept, gpus_live = promql.recorded(promql.RECORDED_GPUS, RECORD_WINDOW), promql.gpu_count_expr()
    age_kept, age_live = promql.recorded_age_expr(RECORD_WINDOW), promql.sample_age_expr()
    same = [none_apart(kept, live), none_apart(live, kept), none_apart(gpus_kept, gpus_live)]
    same += [none_apart(gpus_live, gpus_kept), none_apart(age_live, age_kept)]
    tests = [
        {"eval_time": at, "expr": expr, "exp_samples": [{"labels": "{}", "value": 0}]}
        for at in ("55m", "75m", "85m")
        for expr in same
    ]
    # At 55m the new XIDs of gpu-a (79), gpu-b (13: the facts list it apart) and gpu-g (79); at 85m, past the
    # window, only gpu-d's ECC increase of minute 71.
    tests += [
        {"eval_time": "55m", "expr": f"count({kept})", "exp_samples": [{"labels": "{}", "value": 3}]},
        {
            "eval_time": "85m",
            "expr": f'count({kept[:-1]},{promql.SIGNAL_LABEL}="{ECC}"}})',
            "exp_samples": [{"labels": "{}", "value": 1}],
        },
        {
            "eval_time": "75m",
            "expr": f'sum({gpus_kept[:-1]},kubernetes_node="gpu-e"}})',
            "exp_samples": [{"labels": "{}", "value": 3}],
        },
    ]
    return {"interval": "1m", "input_series": gpu_cluster()["input_series"], "promql_expr_test": tests}


def test_promtool_accepts_the_recording_rules_beside_the_alerts(tmp_path: Path):
    path = tmp_path / "gpu-rules.yml"
    path.write_text(yaml.safe_dump(RECORDS, sort_keys=False, width=1000))
    done = promtool("check", "rules", str(path), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(BY_NAME) + 3} rules found" in done.stdout
    assert [g["name"] for g in RECORDS["groups"]][-1] == promql.RECORDS_GROUP


def test_the_recorded_series_are_what_the_facts_would_read(tmp_path: Path):
    (tmp_path / "gpu-rules.yml").write_text(yaml.safe_dump(RECORDS, sort_keys=False, width=1000))
    document = {"rule_files": ["gpu-rules.yml"], "evaluation_interval": "1m", "tests": [recorded_as_read()]}
    (tmp_path / "test.yml").write_text(yaml.safe_dump(document, sort_keys=False, width=1000))
    done = promtool("test", "rules", "test.yml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
