"""gpu_fleet_report writes its files only when their content changes, never in check mode."""

import json
from pathlib import Path

import pytest

from ansible_collections.kubegpu.scheduling.plugins.modules import gpu_fleet_report
from tests.module_args import patch_module_args

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "report"


def clusters() -> list[dict]:
    sources = ("fleet", "device_plugin", "pod_audit")
    return [
        {"name": "eu", **{s: json.loads((FIXTURES / f"local-{s}.json").read_text()) for s in sources}},
        {"name": "us", "error": "refused"},
    ]


def run_module(capsys, **args):
    with patch_module_args(args), pytest.raises(SystemExit):
        gpu_fleet_report.main()
    return json.loads(capsys.readouterr().out)


def test_writes_three_files_then_leaves_them(tmp_path, capsys):
    dest = tmp_path / "out"
    first = run_module(capsys, clusters=clusters(), dest=str(dest))
    assert first["changed"] is True
    assert sorted(Path(p).name for p in first["written"]) == [
        "gpu-fleet-report.html",
        "gpu-fleet-report.json",
        "gpu-fleet-report.md",
    ]
    assert first["failed_clusters"] == ["us"]
    assert json.loads((dest / "gpu-fleet-report.json").read_text()) == first["data"]
    assert first["report"] == first["data"]  # kept, deprecated, until 2.0.0
    stamps = {p: Path(p).stat().st_mtime_ns for p in first["written"]}

    again = run_module(capsys, clusters=clusters(), dest=str(dest))
    assert again["changed"] is False and again["written"] == []
    assert {p: Path(p).stat().st_mtime_ns for p in first["written"]} == stamps


def test_check_mode_writes_nothing_and_diff_shows_the_change(tmp_path, capsys):
    result = run_module(
        capsys,
        clusters=clusters(),
        dest=str(tmp_path),
        formats=["markdown"],
        _ansible_check_mode=True,
        _ansible_diff=True,
    )
    assert result["changed"] is True
    assert not list(tmp_path.iterdir())
    assert result["diff"][0]["before"] == "" and "| eu | ok |" in result["diff"][0]["after"]


def test_bad_input_fails_with_its_name(tmp_path, capsys):
    result = run_module(capsys, clusters=[{"fleet": {}}], dest=str(tmp_path))
    assert result["failed"] is True and "clusters[0].name" in result["msg"]
    result = run_module(capsys, clusters=clusters(), dest=str(tmp_path), basename="../x")
    assert result["failed"] is True and "basename" in result["msg"]
