"""The kubegpu.scheduling.gpu_nodes inventory plugin against the local cluster: its hosts are the GPU
nodes gpu_node_facts reports, grouped by model, with the same facts as host variables; and the
device_plugin_check playbook runs its host checks on them. Read-only: the cluster is left as found."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import LocalCluster, ansible_env, fleet_facts, run_ansible_module
from test_device_plugin_check import PLAYBOOK, fake_gpu_host, printed_results

from ansible_collections.kubegpu.scheduling.plugins.inventory.gpu_nodes import HOST_VAR_FACTS, group_name

pytestmark = [pytest.mark.cluster, pytest.mark.every_release]

BIN = Path(sys.executable).parent
LOCAL_ADDRESS = "127.0.0.1"


def write_source(tmp_path: Path, **extra: Any) -> Path:
    """local.kubegpu.yml for the local cluster (its kubeconfig from K8S_AUTH_KUBECONFIG), plus a cluster
    that cannot be read."""
    source = {
        "plugin": "kubegpu.scheduling.gpu_nodes",
        "clusters": [{"name": "local"}, {"name": "gone", "kubeconfig": str(tmp_path / "gone.yaml")}],
        **extra,
    }
    path = tmp_path / "local.kubegpu.yml"
    path.write_text(yaml.safe_dump(source))
    return path


def inventory(cluster: LocalCluster, source: Path, *flags: str) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [str(BIN / "ansible-inventory"), "-i", str(source), *flags],
        env=ansible_env(cluster.kubeconfig),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done


def graph_groups(graph: str) -> dict[str, set[str]]:
    """The hosts directly under each group of `ansible-inventory --graph`."""
    groups: dict[str, set[str]] = {}
    stack: list[tuple[int, str]] = []
    for line in graph.splitlines():
        entry = line.lstrip(" |-")
        if not entry:
            continue
        depth, is_group, name = len(line) - len(entry), entry.startswith("@"), entry.lstrip("@").rstrip(":")
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if is_group:
            groups.setdefault(name, set())
            stack.append((depth, name))
        elif stack:
            groups[stack[-1][1]].add(name)
    return groups


def plain(value: Any) -> Any:
    """A value of `ansible-inventory --list` without the markers of untrusted strings."""
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:
            return value["__ansible_unsafe"]
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value


def node_facts(cluster: LocalCluster) -> dict[str, dict[str, Any]]:
    status, result, _done = run_ansible_module(cluster.kubeconfig, "gpu_node_facts")
    assert status == "SUCCESS", result.get("msg")
    return {node["name"]: node for node in fleet_facts(result)["nodes"]}


def test_graph_groups_the_gpu_nodes_by_model_and_list_has_the_facts(cluster: LocalCluster, tmp_path: Path):
    source = write_source(tmp_path)
    graph = inventory(cluster, source, "--graph")
    listed = json.loads(inventory(cluster, source, "--list").stdout)
    facts = node_facts(cluster)
    assert len(facts) >= 5, "the local fleet has GPU nodes of several models"

    groups = graph_groups(graph.stdout)
    assert groups["kubegpu_gpu_nodes"] == set(facts)
    assert groups["kubegpu_cluster_local"] == set(facts)
    models = {node["model"] or "unknown" for node in facts.values()}
    assert len(models) > 1
    for model in models:
        members = {name for name, node in facts.items() if (node["model"] or "unknown") == model}
        assert groups[group_name("kubegpu_model", model)] == members, model
    for name, node in facts.items():
        for kind in {p["kind"] for p in node["problems"]}:
            assert name in groups[group_name("kubegpu_problem", kind)]
    assert 'cluster "gone" cannot be read' in " ".join(graph.stderr.split())

    hostvars = plain(listed["_meta"]["hostvars"])
    assert set(hostvars) == set(facts)
    for name, node in facts.items():
        variables = hostvars[name]
        assert variables["ansible_host"] == LOCAL_ADDRESS
        assert variables["kubegpu_cluster"] == "local"
        assert {var: variables[var] for var in HOST_VAR_FACTS} == {
            var: node[key] for var, key in HOST_VAR_FACTS.items()
        }
        assert variables["kubegpu_problems"] == sorted({p["kind"] for p in node["problems"]})


def test_device_plugin_check_runs_its_host_checks_on_the_inventory_hosts(cluster: LocalCluster, tmp_path: Path):
    gpus = 4
    bin_dir, config = fake_gpu_host(tmp_path, gpus, "accept-nvidia-visible-devices-envvar-when-unprivileged = false\n")
    local = {"ansible_connection": "'local'", "ansible_python_interpreter": repr(sys.executable)}
    source = write_source(tmp_path, compose=local)
    hosts = set(plain(json.loads(inventory(cluster, source, "--list").stdout)["_meta"]["hostvars"]))
    extra = {"device_plugin_check_report_only": True, "device_plugin_check_toolkit_config_paths": [str(config)]}
    env = ansible_env(
        cluster.kubeconfig,
        ANSIBLE_STDOUT_CALLBACK="ansible.builtin.minimal",
        ANSIBLE_HOST_KEY_CHECKING="0",
        PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    command = [str(BIN / "ansible-playbook"), "-i", str(source), str(PLAYBOOK), "-e", json.dumps(extra)]
    done = subprocess.run(command, check=False, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    checks = [r for r in printed_results(done.stdout) if "findings" in r and "report" in r]
    assert checks, done.stdout[-4000:]
    checked = {n["name"]: n["host"] for n in checks[-1]["nodes"] if n["name"] in hosts}
    assert checked, "the check reports on the inventory's GPU nodes"
    for name, host in checked.items():
        assert host is not None, f"no host checks on {name}"
        assert host["gpu_count"] == gpus and host["driver_working"] is True, name
