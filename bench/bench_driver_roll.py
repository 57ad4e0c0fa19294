# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/driver_upgrade.yml in host mode on the local cluster, against its targets: --nodes KWOK
GPU nodes rolled in batches of --batch (the canary batch of the same size), the collection's writes
equal to what the plan says (per node a quarantine patch, a proof pod created and deleted, a release
patch; the proof namespace once), and under 3 minutes of the collection's own time, the host tasks
excluded.

The host tasks (bench/playbooks/driver_roll_host_tasks.yml) withdraw a node's GPUs, label the new
version and publish the GPUs again half a second later (tests/cluster/driver_roll.py quick); their
time is measured per task by bench/callback_plugins/task_timer.py and taken out of the playbook's
wall time. The nodes are made for the run (a GPU model of their own, 8 GPUs each) and deleted at its end.

    .venv/bin/python -m bench.bench_driver_roll            # the shared test cluster is fine: 100 nodes, 100 pods
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

from bench.bench_quarantine_live import create_all, wait, writes
from tests.cluster import cluster as local_cluster

ROOT = Path(__file__).resolve().parents[1]
TARGET_SECONDS = 180
OLD, NEW = "550.90.07", "570.133.20"
PROOF_NAMESPACE = "kubegpu-release-proof"
TAINT = {"key": "kubegpu.test/bench", "effect": "NoSchedule"}


def node(name: str, model: str) -> dict:
    capacity = {"nvidia.com/gpu": "8", "cpu": "96", "memory": "1Ti", "pods": "250"}
    labels = {"type": "kwok", "nvidia.com/gpu.product": model, "nvidia.com/cuda.driver-version.full": OLD}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {**labels, "kubegpu.bench/roll": model.lower()},
        },
        "spec": {"taints": [TAINT]},
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def ready(api: local_cluster.Api, selector: str, count: int) -> bool:
    status, body = api.request("GET", f"/api/v1/nodes?labelSelector={selector}")
    if status != 200 or not isinstance(body, dict):
        return False
    ready_nodes = [
        n
        for n in body["items"]
        if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", []))
    ]
    return len(ready_nodes) >= count


def run_roll(layout: local_cluster.Layout, extra: dict, times: Path) -> tuple[float, subprocess.CompletedProcess]:
    sys.path.insert(0, str(ROOT / "tests" / "integration"))
    from conftest import ansible_env  # the environment the integration tests run ansible in

    from tests.collection import collections_root

    env = ansible_env(
        layout.kubeconfig,
        ANSIBLE_COLLECTIONS_PATH=str(collections_root()),
        ANSIBLE_CALLBACK_PLUGINS=str(ROOT / "bench" / "callback_plugins"),
        ANSIBLE_CALLBACKS_ENABLED="task_timer",
        KUBEGPU_TASK_TIMES=str(times),
    )
    started = time.monotonic()
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            str(ROOT / "playbooks" / "driver_upgrade.yml"),
            "-e",
            json.dumps(extra),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    return time.monotonic() - started, done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--batch", type=int, default=10)
    args = parser.parse_args()

    layout = local_cluster.Layout(local_cluster.state_dir())
    api = local_cluster.Api(layout)
    run = uuid.uuid4().hex[:6]
    model = f"NVIDIA-ROLL-BENCH-{run}"
    names = [f"bench-roll-{run}-{i:03d}" for i in range(args.nodes)]
    namespace_made = api.request("GET", f"/api/v1/namespaces/{PROOF_NAMESPACE}")[0] == 404
    times = Path(tempfile.mkdtemp(prefix="kubegpu-roll-bench-")) / "times.jsonl"
    try:
        create_all(api, [("/api/v1/nodes", node(n, model)) for n in names])
        wait(f"{args.nodes} nodes Ready", lambda: ready(api, f"kubegpu.bench/roll={model.lower()}", args.nodes), 300)
        extra = {
            "driver_upgrade_target_version": NEW,
            "driver_upgrade_label_selectors": [f"kubegpu.bench/roll={model.lower()}"],
            "driver_upgrade_canary": args.batch,
            "driver_upgrade_max_unavailable": args.batch,
            "driver_upgrade_max_share": 1.0,
            "driver_upgrade_host_tasks": str(ROOT / "bench" / "playbooks" / "driver_roll_host_tasks.yml"),
            "driver_upgrade_gpu_timeout": 60,
            "driver_upgrade_proof": {"tolerations": [{"operator": "Exists"}]},
            "driver_upgrade_proof_timeout": 120,
            "roll_bench_repo": str(ROOT),
        }
        before = writes(api)
        took, done = run_roll(layout, extra, times)
        sent = writes(api) - before
        tasks = [json.loads(line) for line in times.read_text().splitlines()] if times.exists() else []
        host = sum(t["seconds"] for t in tasks if "Bench host" in t["name"])
        module_writes = sum(t["writes"] for t in tasks)
        own = took - host
        planned = args.nodes * (1 + 2 + 1) + int(namespace_made)
        by_action: Counter[str] = Counter()
        for t in tasks:
            by_action[t["action"].rsplit(".", 1)[-1]] += t["seconds"]
        print(f"roll of {args.nodes} nodes in batches of {args.batch}: playbook {took:.1f} s, host tasks {host:.1f} s")
        print(f"the collection's own time: {own:.1f} s (target under {TARGET_SECONDS} s)")
        print(f"writes: the modules' {module_writes}, the plan's {planned} (target: equal)")
        print("seconds by task action: " + ", ".join(f"{k} {v:.1f}" for k, v in by_action.most_common()))
        print("API server writes in that time: " + ", ".join(f"{k}: {v}" for k, v in sorted(sent.items())))
        if done.returncode != 0:
            print(done.stdout[-3000:] + done.stderr[-2000:])
        return 0 if done.returncode == 0 and own < TARGET_SECONDS and module_writes == planned else 1
    finally:
        for name in names:
            api.request("DELETE", f"/api/v1/nodes/{name}")
        if namespace_made:
            api.request("DELETE", f"/api/v1/namespaces/{PROOF_NAMESPACE}")


if __name__ == "__main__":
    sys.exit(main())
