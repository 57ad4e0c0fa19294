"""Every runbook under playbooks/ against the running local cluster, with the ansible-playbook of the Python
that runs this file (`make test-versions` runs it with .venv-oldest's and .venv-newest's): each play must end
with failed=0 and unreachable=0 on every host. Then each module no runbook calls, with that Python's
`ansible`, and the gpu_nodes inventory plugin with its `ansible-inventory`: each must succeed.

    .venv-oldest/bin/python tests/versions/smoke.py KUBECONFIG

The runbooks that write where the integration tests expect the fleet as it was (quarantine, device quarantine,
release, the admission policy) run in check mode; the device plugin is installed in a namespace
of its own (made and removed here) on no node (its selector matches none) and removed again; the rest run as
`make site` runs them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PLAYBOOKS = REPO / "playbooks"
ANSIBLE_PLAYBOOK = Path(sys.executable).with_name("ansible-playbook")
ANSIBLE = Path(sys.executable).with_name("ansible")
ANSIBLE_INVENTORY = Path(sys.executable).with_name("ansible-inventory")
PLUGIN_CONFIG = REPO / "tests" / "unit" / "fixtures" / "plugin_config" / "good" / "readme-time-slicing.yaml"
RECAP_LINE = re.compile(r"^(\S+)\s+:\s+ok=\d+\s+changed=\d+\s+unreachable=(\d+)\s+failed=(\d+)", re.MULTILINE)
DEVICE_PLUGIN_NAMESPACE = "kubegpu-smoke-versions"
# A GPU node of tests/cluster/fleet.yaml, the only one of its model: a share of 1 lets the check-mode run
# plan its quarantine.
CHECKED_NODE = "gfd-h100"
# A DRA node of that fleet: its first published device is the one device quarantine plans in check mode.
DRA_NODE = "dra-h100"


def runs(report_dir: Path, inventory: Path, device: dict[str, str]) -> list[tuple[str, list[str], dict[str, Any]]]:
    """(playbook, ansible-playbook options, extra vars) in the order they run; `device` is the one device
    quarantine plans (`first_device`)."""
    device_plugin = {
        "device_plugin_namespace": DEVICE_PLUGIN_NAMESPACE,
        "device_plugin_node_selector": {"kubegpu.io/no-node": "here"},
    }
    return [
        ("site.yml", [], {}),
        ("preflight.yml", [], {}),
        ("fleet_facts.yml", [], {}),
        ("node_labels.yml", [], {}),
        ("device_plugin_check.yml", [], {"device_plugin_check_report_only": True}),
        ("pod_audit.yml", [], {"pod_audit_fail_on": "never"}),
        ("sample_workload.yml", [], {}),
        ("fleet_report.yml", ["-i", str(inventory)], {"kubegpu_report_dir": str(report_dir)}),
        ("device_plugin.yml", [], device_plugin),
        ("device_plugin.yml", [], {**device_plugin, "device_plugin_state": "absent"}),
        ("admission_policy.yml", ["--check", "--diff"], {}),
        ("alert_rules.yml", [], {"alert_rules_dest": str(report_dir / "kubegpu-gpu-alerts.yml")}),
        (
            "node_quarantine.yml",
            ["--check", "--diff"],
            {
                "node_quarantine_nodes": [CHECKED_NODE],
                "node_quarantine_reason": "smoke run",
                "node_quarantine_max_share": 1.0,
            },
        ),
        ("node_release.yml", ["--check", "--diff"], {"node_release_nodes": [CHECKED_NODE]}),
        (
            "driver_upgrade.yml",
            ["--check", "--diff"],
            {
                "driver_upgrade_target_version": "570.133.20",
                "driver_upgrade_nodes": [CHECKED_NODE],
                "driver_upgrade_host_tasks": "install-driver.yml",
                "driver_upgrade_max_share": 1.0,
            },
        ),
        (
            "device_quarantine.yml",
            ["--check", "--diff"],
            {
                "device_quarantine_devices": [device],
                "device_quarantine_reason": "smoke run",
                "device_quarantine_max_share": 1.0,
            },
        ),
    ]


def module_runs() -> list[tuple[str, list[str], dict[str, Any]]]:
    """(module, ansible options, module args) of the modules no runbook under playbooks/ calls."""
    return [
        ("gpu_driver_info", [], {}),
        ("gpu_placement_info", [], {}),
        ("gpu_plugin_config_validate", [], {"src": str(PLUGIN_CONFIG)}),
    ]


def first_device(kubeconfig: str, node: str) -> dict[str, str]:
    """The driver, pool and name of the first device a ResourceSlice of `node` publishes."""
    from kubernetes import client, config

    api = client.CustomObjectsApi(config.new_client_from_config(config_file=kubeconfig))
    for item in api.list_cluster_custom_object("resource.k8s.io", "v1", "resourceslices")["items"]:
        spec = item["spec"]
        if spec.get("nodeName") == node and spec.get("devices"):
            return {"driver": spec["driver"], "pool": spec["pool"]["name"], "device": spec["devices"][0]["name"]}
    raise RuntimeError(f"no ResourceSlice publishes a device of {node}")


def recap_failures(output: str) -> list[str]:
    """What the PLAY RECAP says failed, or that there is none."""
    lines = RECAP_LINE.findall(output.split("PLAY RECAP", 1)[-1]) if "PLAY RECAP" in output else []
    if not lines:
        return ["no PLAY RECAP in the output"]
    return [f"{host}: unreachable={u} failed={f}" for host, u, f in lines if (u, f) != ("0", "0")]


def adhoc_failures(output: str) -> list[str]:
    """What `ansible localhost -m` says failed, or that there is none."""
    said = re.search(r"^localhost \| ([A-Z!]+)", output, re.MULTILINE)
    if not said:
        return ["no result in the output"]
    return [] if said[1] in ("SUCCESS", "CHANGED") else [f"localhost: {said[1]}"]


def inventory_failures(output: str) -> list[str]:
    """That `ansible-inventory --list` found no GPU node, or nothing."""
    try:
        hosts = json.loads(output).get("_meta", {}).get("hostvars", {})
    except ValueError:
        return ["no inventory in the output"]
    return [] if hosts else ["no GPU node in the inventory"]


def ran(label: str, command: list[str], env: dict[str, str], failures: Callable[[str], list[str]]) -> bool:
    """Run one command; print its label, time and verdict, and its output's tail when it failed."""
    began = time.monotonic()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900, check=False)
    problems = failures(done.stdout)
    if done.returncode != 0:
        problems.append(f"exit status {done.returncode}")
    said = "ok" if not problems else "FAILED: " + "; ".join(problems)
    print(f"{label} ({time.monotonic() - began:.0f}s): {said}", flush=True)
    if problems:
        print(done.stdout[-4000:] + done.stderr[-2000:], flush=True)
    return not problems


def core_api(kubeconfig: str) -> Any:
    from kubernetes import client, config

    return client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig))


def create_namespace(kubeconfig: str, name: str) -> None:
    from kubernetes.client.rest import ApiException

    try:
        core_api(kubeconfig).create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    except ApiException as exc:
        if exc.status != 409:
            raise


def remove_namespace(kubeconfig: str, name: str) -> None:
    from kubernetes.client.rest import ApiException

    api = core_api(kubeconfig)
    try:
        api.delete_namespace(name)
    except ApiException as exc:
        if exc.status != 404:
            raise
    # Gone before the next run creates it again (a namespace still terminating refuses new objects).
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            api.read_namespace(name)
        except ApiException as exc:
            if exc.status == 404:
                return
            raise
        time.sleep(1)
    raise RuntimeError(f"namespace {name} is still there two minutes after its deletion")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    kubeconfig = argv[0]
    env = {k: v for k, v in os.environ.items() if not k.startswith("K8S_AUTH_") and k != "KUBECONFIG"}
    env.update(
        K8S_AUTH_KUBECONFIG=kubeconfig,
        ANSIBLE_COLLECTIONS_PATH=sysconfig.get_paths()["purelib"],
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_LOCALHOST_WARNING="false",
        ANSIBLE_INVENTORY_UNPARSED_WARNING="false",
    )
    failed = []
    device = first_device(kubeconfig, DRA_NODE)
    with tempfile.TemporaryDirectory(prefix="kubegpu-smoke-") as tmp:
        inventory = Path(tmp) / "clusters.yml"
        local = {
            "ansible_connection": "local",
            "ansible_python_interpreter": sys.executable,
            "kubegpu_kubeconfig": kubeconfig,
        }
        inventory.write_text(json.dumps({"all": {"hosts": {"local": local}}}))
        create_namespace(kubeconfig, DEVICE_PLUGIN_NAMESPACE)
        try:
            for playbook, options, extra in runs(Path(tmp) / "report", inventory, device):
                extra = {"ansible_python_interpreter": sys.executable, **extra}
                command = [str(ANSIBLE_PLAYBOOK), str(PLAYBOOKS / playbook), *options, "-e", json.dumps(extra)]
                if not ran(f"{playbook} {' '.join(options)}", command, env, recap_failures):
                    failed.append(playbook)
        finally:
            remove_namespace(kubeconfig, DEVICE_PLUGIN_NAMESPACE)
        for module, options, args in module_runs():
            command = [
                str(ANSIBLE),
                "localhost",
                "-m",
                f"kubegpu.scheduling.{module}",
                *options,
            ]
            # `-a '{}'` reads as free-form text to ansible-core 2.18: a module without arguments gets none.
            command += ["-a", json.dumps(args)] if args else []
            command += ["-e", json.dumps({"ansible_python_interpreter": sys.executable})]
            if not ran(f"{module} {' '.join(options)}", command, env, adhoc_failures):
                failed.append(module)
        source = Path(tmp) / "local.kubegpu.yml"
        source.write_text(json.dumps({"plugin": "kubegpu.scheduling.gpu_nodes", "kubeconfig": kubeconfig}))
        if not ran(
            "gpu_nodes inventory", [str(ANSIBLE_INVENTORY), "-i", str(source), "--list"], env, inventory_failures
        ):
            failed.append("gpu_nodes")
    total = len(runs(Path(), Path(), device)) + len(module_runs()) + 1
    print(f"{total - len(failed)} runs passed, {len(failed)} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
