"""playbooks/fleet_report.yml, which reads each cluster once (gpu_cluster_info), writes the report the
three modules wrote, byte for byte but for the clusters' times: the playbook as it was
(tests/integration/fixtures/fleet_report_three_modules.yml) and today's over the same inventory, on the
local cluster, with a cluster that cannot be reached among them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ANSIBLE_BIN, REPO_ROOT, LocalCluster, ansible_env

pytestmark = [pytest.mark.cluster, pytest.mark.every_release]

THREE_MODULES = Path(__file__).parent / "fixtures" / "fleet_report_three_modules.yml"
ONE_READ = REPO_ROOT / "playbooks" / "fleet_report.yml"
FILES = ("gpu-fleet-report.json", "gpu-fleet-report.md", "gpu-fleet-report.html")
# A cluster's time as the Markdown and HTML renderers print it (report/text.py seconds()).
TIME = re.compile(r"\b\d+\.\d s\b")


def write_inventory(tmp_path: Path, cluster: LocalCluster) -> Path:
    unreachable = yaml.safe_load(cluster.kubeconfig.read_text())
    for entry in unreachable["clusters"]:
        entry["cluster"]["server"] = "https://127.0.0.1:1"  # nothing listens: connection refused
    (tmp_path / "unreachable.kubeconfig").write_text(yaml.safe_dump(unreachable))
    hosts = {
        "first": {"kubegpu_kubeconfig": str(cluster.kubeconfig)},
        "second": {"kubegpu_kubeconfig": str(cluster.kubeconfig)},
        "down": {"kubegpu_kubeconfig": str(tmp_path / "unreachable.kubeconfig")},
    }
    inventory = {
        "all": {"hosts": hosts, "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}
    }
    path = tmp_path / "clusters.yml"
    path.write_text(yaml.safe_dump(inventory))
    return path


def run_report(playbook: Path, inventory: Path, report_dir: Path, kubeconfig: Path) -> subprocess.CompletedProcess:
    # This checkout's collection, whatever other copy is installed.
    collections = report_dir.parent / "collections"
    if not collections.exists():
        (collections / "ansible_collections" / "kubegpu").mkdir(parents=True)
        (collections / "ansible_collections" / "kubegpu" / "scheduling").symlink_to(REPO_ROOT)
    env = ansible_env(kubeconfig, ANSIBLE_COLLECTIONS_PATH=str(collections), ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false")
    env.pop("K8S_AUTH_KUBECONFIG")
    command = [
        str(ANSIBLE_BIN / "ansible-playbook"),
        "-i",
        str(inventory),
        "--forks",
        "3",
        str(playbook),
        "-e",
        f"kubegpu_report_dir={report_dir}",
        "-e",
        "kubegpu_report_generated_at=2026-12-02T00:00:00+00:00",
    ]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=False)


def without_times(name: str, text: str) -> str:
    if name.endswith(".json"):
        report = json.loads(text)
        for entry in report["clusters"]:
            assert entry["elapsed_seconds"] is not None and entry["elapsed_seconds"] >= 0
            entry["elapsed_seconds"] = None
        return json.dumps(report, indent=2, sort_keys=True)
    return TIME.sub("T s", text)


def test_one_read_a_cluster_writes_the_report_of_the_three_modules(cluster: LocalCluster, tmp_path: Path):
    inventory = write_inventory(tmp_path, cluster)
    reports = {}
    for name, playbook in (("three", THREE_MODULES), ("one", ONE_READ)):
        done = run_report(playbook, inventory, tmp_path / name, cluster.kubeconfig)
        # The unreachable cluster fails the run, after the report is written.
        assert done.returncode != 0 and "clusters that could not be read: down" in done.stdout, done.stdout[-3000:]
        reports[name] = {f: (tmp_path / name / f).read_text() for f in FILES}

    report = json.loads(reports["one"]["gpu-fleet-report.json"])
    first = next(entry for entry in report["clusters"] if entry["name"] == "first")
    down = next(entry for entry in report["clusters"] if entry["name"] == "down")
    assert first["status"] == "ok" and first["nodes"] and first["problems"] and first["pod_audit"]["checked"]
    assert down["error"]["task"] == "Gather the GPU fleet facts" and "connection refused" in down["error"]["message"]
    for name in FILES:
        assert without_times(name, reports["one"][name]) == without_times(name, reports["three"][name]), name
