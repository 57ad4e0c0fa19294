# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Time gpu_node_facts and gpu_node_label beside kubectl, on one running cluster, in one run.

Facts (repetitions alternate, the order rotating each round):
  - gpu_node_facts through ansible-playbook (bench/playbooks/facts.yml);
  - gpu_node_facts through its module_utils in a subprocess (bench/facts_direct.py: the
    module's read_fleet and summarise), whose peak RSS is the module's memory;
  - the floor: `kubectl get nodes -o json` then `kubectl get pods -A -o json`, output discarded;
  - ansible-playbook running an empty play: Ansible's fixed cost.
Labels (with --labels; per round the two pairs alternate which goes first):
  - gpu_node_label through ansible-playbook (bench/playbooks/label.yml), cold (the accelerator
    label and the ownership annotation stripped from every node first, untimed) then warm;
  - `kubectl label nodes -l <model label>=<model> accelerator=<value> --overwrite`, one command
    per model, cold (stripped first) then warm.
  Writes are counted twice: by the module (`writes`) and on the API server (the delta of
  apiserver_request_total for PATCH on nodes, no subresource), which counts kubectl's too.

    python -m bench.bench_facts_labels --kubeconfig PATH [--repeat 5] [--labels] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.labels.plan import (
    DEFAULT_LABEL_KEY,
    OWNERSHIP_ANNOTATION,
    label_value_for,
)
from bench import fleet_scale
from bench.timing import Contender, alternate, run_once
from tests.cluster import versions
from tests.collection import collections_root

HERE = Path(__file__).resolve().parent

NODES = "/api/v1/nodes"
_PATCH_NODES = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\}\s+(?P<value>[0-9.e+]+)$")


def tools() -> dict[str, str]:
    bin_dir = Path(sys.executable).parent
    return {
        "python": sys.executable,
        "ansible_playbook": str(bin_dir / "ansible-playbook")
        if (bin_dir / "ansible-playbook").exists()
        else shutil.which("ansible-playbook") or "ansible-playbook",
        "kubectl": str(versions.bin_dir() / "kubectl"),
    }


def playbook_command(t: dict[str, str], kubeconfig: str, playbook: str) -> list[str]:
    return [
        t["ansible_playbook"],
        "-i",
        "localhost,",
        "-e",
        f"kubeconfig={kubeconfig}",
        "-e",
        f"ansible_python_interpreter={t['python']}",
        str(HERE / "playbooks" / playbook),
    ]


def ansible_env() -> dict[str, str]:
    return {
        "ANSIBLE_COLLECTIONS_PATH": str(collections_root()),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_RETRY_FILES_ENABLED": "0",
        "ANSIBLE_LOCALHOST_WARNING": "0",
    }


def check_ok(contender: Contender, _output: str) -> None:
    if contender.codes[-1] != 0:
        raise RuntimeError(f"{contender.name} failed (exit {contender.codes[-1]})")


# --- facts ----------------------------------------------------------------------------------


def facts_contenders(kubeconfig: str, with_empty: bool = True) -> list[Contender]:
    t = tools()
    kubectl = [t["kubectl"], "--kubeconfig", kubeconfig]

    def direct_after(contender: Contender, output: str) -> None:
        check_ok(contender, output)
        line = output.strip().splitlines()[-1]
        contender.notes.setdefault("runs", []).append(json.loads(line))

    chosen = [
        Contender(
            "gpu_node_facts via ansible-playbook",
            [playbook_command(t, kubeconfig, "facts.yml")],
            env=ansible_env(),
            after=check_ok,
        ),
        Contender(
            "gpu_node_facts via module_utils",
            [[t["python"], "-m", "bench.facts_direct", "--kubeconfig", kubeconfig]],
            capture=True,
            after=direct_after,
        ),
        Contender(
            "kubectl get nodes + get pods -A, -o json (floor)",
            [kubectl + ["get", "nodes", "-o", "json"], kubectl + ["get", "pods", "-A", "-o", "json"]],
            after=check_ok,
        ),
    ]
    if with_empty:
        chosen.append(
            Contender(
                "ansible-playbook, empty play (fixed cost)",
                [playbook_command(t, kubeconfig, "empty.yml")],
                env=ansible_env(),
                after=check_ok,
            )
        )
    return chosen


def list_sizes(kubeconfig: str) -> dict[str, int]:
    """Bytes of `kubectl get ... -o json` (what the floor reads and prints), and object counts."""
    t = tools()
    sizes = {}
    for what, args in (("nodes", ["get", "nodes", "-o", "json"]), ("pods", ["get", "pods", "-A", "-o", "json"])):
        out = subprocess.run([t["kubectl"], "--kubeconfig", kubeconfig, *args], check=True, capture_output=True).stdout
        sizes[f"{what}_json_bytes"] = len(out)
        sizes[f"{what}_count"] = len(json.loads(out)["items"])
    return sizes


def profile(module: str, kubeconfig: str, out: Path, top: int = 25) -> str:
    """cProfile of a module_utils run; the top functions by internal and by cumulative time."""
    import pstats
    from io import StringIO

    subprocess.run(
        [sys.executable, "-m", module, "--kubeconfig", kubeconfig, "--profile", str(out)],
        check=True,
        capture_output=True,
    )
    text = StringIO()
    stats = pstats.Stats(str(out), stream=text)
    stats.strip_dirs().sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return text.getvalue()


def bench_facts(kubeconfig: str, repeat: int, log: Callable[[str], None], with_empty: bool = True) -> dict[str, Any]:
    contenders = facts_contenders(kubeconfig, with_empty)
    run_once(contenders[1])  # warm-up: page cache, the API server's watch cache; not counted
    contenders[1].walls.clear(), contenders[1].cpus.clear(), contenders[1].rss_kib.clear()
    contenders[1].codes.clear(), contenders[1].notes.clear()
    alternate(contenders, repeat, log)
    return {"contenders": [c.summary() for c in contenders], "sizes": list_sizes(kubeconfig)}


# --- labels ---------------------------------------------------------------------------------


def label_commands(kubectl: list[str]) -> list[list[str]]:
    """One `kubectl label` per model, selecting the nodes by the label that names the model."""
    commands = []
    for model in fleet_scale.MODELS:
        source = model.labels[model.source_key]
        value = label_value_for(source, {})
        commands.append(
            kubectl
            + ["label", "nodes", "-l", f"{model.source_key}={source}", f"{DEFAULT_LABEL_KEY}={value}", "--overwrite"]
        )
    return commands


class Cluster:
    """What the label benchmark does to the cluster outside the timed commands."""

    def __init__(self, kubeconfig: str) -> None:
        self.client = fleet_scale.make_client(kubeconfig, pool=64)

    def node_patches(self) -> int:
        """Node PATCH requests (no subresource) the API server has served since it started."""
        total = 0.0
        for line in self.client.read_text("/metrics").splitlines():
            match = _PATCH_NODES.match(line)
            if not match:
                continue
            labels = dict(re.findall(r'(\w+)="([^"]*)"', match["labels"]))
            if labels.get("verb") == "PATCH" and labels.get("resource") == "nodes" and not labels.get("subresource"):
                total += float(match["value"])
        return int(total)

    def strip(self) -> int:
        """Remove the accelerator label and the ownership annotation from every node that has either."""
        patch = {"metadata": {"labels": {DEFAULT_LABEL_KEY: None}, "annotations": {OWNERSHIP_ANNOTATION: None}}}
        names = [
            item["metadata"]["name"]
            for item in self.client.list_items(NODES, page_size=1000)
            if DEFAULT_LABEL_KEY in (item["metadata"].get("labels") or {})
            or OWNERSHIP_ANNOTATION in (item["metadata"].get("annotations") or {})
        ]
        fleet_scale.run_bounded(names, lambda name: self.client.patch_merge(f"{NODES}/{name}", patch), 32)
        return len(names)

    def labeled(self) -> int:
        return sum(
            1
            for item in self.client.list_items(NODES, page_size=1000)
            if DEFAULT_LABEL_KEY in (item["metadata"].get("labels") or {})
        )


def bench_labels(kubeconfig: str, repeat: int, log: Callable[[str], None]) -> dict[str, Any]:
    t = tools()
    cluster = Cluster(kubeconfig)
    nodes = sum(1 for _node in cluster.client.list_items(NODES, page_size=1000))
    kubectl = [t["kubectl"], "--kubeconfig", kubeconfig]
    mark: dict[str, int] = {}

    def cold_before() -> None:
        cluster.strip()
        if cluster.labeled():
            raise RuntimeError("nodes still labeled after stripping")
        time.sleep(1)  # let the strip patches settle out of the API server's counters
        mark["patches"] = cluster.node_patches()

    def warm_before() -> None:
        mark["patches"] = cluster.node_patches()

    def after(cold: bool, module: bool | str) -> Callable[[Contender, str], None]:
        def check(contender: Contender, output: str) -> None:
            check_ok(contender, output)
            server = cluster.node_patches() - mark["patches"]
            contender.notes.setdefault("server_patches", []).append(server)
            labeled = cluster.labeled()
            contender.notes.setdefault("labeled_nodes", []).append(labeled)
            if module == "direct":
                result = json.loads(output.strip().splitlines()[-1])
                contender.notes.setdefault("module_writes", []).append(result["writes"])
                contender.notes.setdefault("module_counts", []).append(result["counts"])
            elif module:
                match = re.search(r'"msg": "BENCH (\{.*\})"', output) or re.search(r"BENCH (\{.*\})", output)
                if not match:
                    raise RuntimeError(f"{contender.name}: no BENCH line in the playbook output")
                result = json.loads(match.group(1).replace('\\"', '"'))
                contender.notes.setdefault("module_writes", []).append(result["writes"])
                contender.notes.setdefault("module_counts", []).append(result["counts"])
            if cold and labeled != nodes:
                raise RuntimeError(f"{contender.name}: {labeled} of {nodes} nodes labeled")

        return check

    module_cold = Contender(
        "gpu_node_label via ansible-playbook, cold",
        [playbook_command(t, kubeconfig, "label.yml")],
        env=ansible_env(),
        capture=True,
        before=cold_before,
        after=after(True, True),
    )
    module_warm = Contender(
        "gpu_node_label via ansible-playbook, warm",
        [playbook_command(t, kubeconfig, "label.yml")],
        env=ansible_env(),
        capture=True,
        before=warm_before,
        after=after(False, True),
    )
    direct_warm = Contender(
        "gpu_node_label via module_utils, warm",
        [[t["python"], "-m", "bench.label_direct", "--kubeconfig", kubeconfig]],
        capture=True,
        before=warm_before,
        after=after(False, "direct"),
    )
    kubectl_cold = Contender(
        "kubectl label nodes -l <model> --overwrite, per model, cold",
        label_commands(kubectl),
        before=cold_before,
        after=after(True, False),
    )
    kubectl_warm = Contender(
        "kubectl label nodes -l <model> --overwrite, per model, warm",
        label_commands(kubectl),
        before=warm_before,
        after=after(False, False),
    )
    groups = [(module_cold, module_warm, direct_warm), (kubectl_cold, kubectl_warm)]
    for repetition in range(repeat):
        for group in groups[repetition % 2 :] + groups[: repetition % 2]:
            for contender in group:
                run_once(contender)
                log(
                    f"  [{repetition + 1}/{repeat}] {contender.name}: {contender.walls[-1]:.2f}s, "
                    f"server patches {contender.notes['server_patches'][-1]}"
                )
    return {
        "nodes": nodes,
        "label_commands": len(fleet_scale.MODELS),
        "contenders": [c.summary() for c in (module_cold, kubectl_cold, module_warm, direct_warm, kubectl_warm)],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--labels", action="store_true", help="also the label benchmark")
    parser.add_argument("--label-repeat", type=int, default=3)
    parser.add_argument(
        "--profile", type=Path, help="write a cProfile of the module_utils facts run here (and of a warm label run)"
    )
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    results: dict[str, Any] = {"facts": bench_facts(args.kubeconfig, args.repeat, log)}
    if args.labels:
        results["labels"] = bench_labels(args.kubeconfig, args.label_repeat, log)
    if args.profile:
        results["facts_profile"] = profile("bench.facts_direct", args.kubeconfig, args.profile)
        if args.labels:  # the fleet is labeled now: a warm run
            labels_out = args.profile.with_name(args.profile.stem + "-labels-warm.pstats")
            results["labels_warm_profile"] = profile("bench.label_direct", args.kubeconfig, labels_out)
    text = json.dumps(results, indent=2)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text)
    for contender in results["facts"]["contenders"] + results.get("labels", {}).get("contenders", []):
        print(
            f"{contender['name']}: median {contender['median']:.2f}s (min {contender['min']:.2f}, "
            f"max {contender['max']:.2f}), peak RSS {contender['peak_rss_mb']:.0f} MB"
        )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    sys.exit(main())
