# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write docs/benchmarks.md and docs/benchmark-facts-scaling.png from bench/results/.

Reads machine.json, validate.json, fleet.json and facts-<nodes>.json as bench/run.py leaves
them; bench/analysis.md, when present, is included as the analysis section. The sections of the
existing report between the hand-written markers (HAND_WRITTEN_START, HAND_WRITTEN_END) are carried
over unchanged, and so are its DRA and scale sections when the results hold none. With --scale-only,
puts the section of bench/scale.py's runs (scale-<nodes>.json) into the existing report and draws
the scaling plot from them. Needs matplotlib for the plot (run it with the benchmark's virtual
environment).

    python -m bench.report [--results bench/results] [--docs docs] [--dra-only | --scale-only]
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PLOT = "benchmark-facts-scaling.png"

FACTS_ANSIBLE = "gpu_node_facts via ansible-playbook"
FACTS_ALL_DRA_DEVICES = "gpu_node_facts via ansible-playbook, dra_devices=all (every DRA device listed)"
FACTS_BEFORE_PREFIX = "gpu_node_facts via ansible-playbook, before: "
FACTS_DIRECT = "gpu_node_facts via module_utils"
KUBECTL_PEER = "kubectl get nodes + get pods -A, -o json (peer)"
TRANSFER_FLOOR = "transfer floor: the module's pages over HTTPS, not decoded"
DECODE_FLOOR = "decode floor: the module's pages, json.loads each, nothing kept"
K8S_INFO_PEER = "kubernetes.core.k8s_info nodes + pods, Jinja sums (peer)"
ANSIBLE_EMPTY = "ansible-playbook, empty play (fixed cost)"
DRA_SECTION_START = "<!-- fleet facts, DRA: written by bench/report.py -->"
DRA_SECTION_END = "<!-- end of fleet facts, DRA -->"
SCALE_SECTION_START = "<!-- fleet facts at scale: written by bench/report.py --scale-only -->"
SCALE_SECTION_END = "<!-- end of fleet facts at scale -->"
HAND_WRITTEN_START = "<!-- hand-written section"
HAND_WRITTEN_END = "<!-- end of hand-written section -->"
TARGET_SCALE_RSS_MB = 150.0
SCALE_COLUMNS = (
    "Nodes",
    "Pods",
    "GPU pods",
    "Transfer floor (s)",
    "Decode floor (s)",
    "module_utils (s)",
    "module_utils / decode floor",
    "decode floor CPU (s)",
    "module_utils CPU (s)",
    "ansible-playbook (s)",
    "ansible-playbook less the empty play / decode floor",
    "kubectl, peer (s)",
    "module_utils peak RSS (MB)",
    "decode floor peak RSS (MB)",
    "ansible-playbook peak RSS (MB)",
    "Facts JSON (MB)",
    "API requests",
)
TARGET_FACTS = 1.2  # against the decode floor
TARGET_WARM_S = 3.0
TARGET_CHECKOV = 50.0
TARGET_PARSE = 2.0
TARGET_PARALLEL_PARSE = 0.65  # gpu-pod-validate --jobs 2 against the one-process parse floor


def load(path: Path) -> Any:
    return json.loads(path.read_text()) if path.exists() else None


def by_name(contenders: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in contenders}


def find(contenders: dict[str, dict[str, Any]], prefix: str) -> dict[str, Any] | None:
    return next((c for name, c in contenders.items() if name.startswith(prefix)), None)


def s(value: float) -> str:
    return f"{value:.2f}" if value < 100 else f"{value:.0f}"


def mb(value: float) -> str:
    return f"{value:,.0f}"


def verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


def row(c: dict[str, Any], ratio: str, extra: str = "") -> str:
    runs = len(c["walls"])
    return (
        f"| {c['name']} | {s(c['median'])} | {s(c['min'])} | {s(c['max'])} | {s(c['cpu_median'])} | "
        f"{mb(c['peak_rss_mb'])} | {runs} | {ratio} |{extra}"
    )


def fit_line(xs: list[float], ys: list[float]) -> tuple[float, float, float]:
    """Least-squares a + b*x, and R²."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0
    a = my - b * mx
    ss_tot = sum((y - my) ** 2 for y in ys)
    ss_res = sum((y - a - b * x) ** 2 for x, y in zip(xs, ys, strict=True))
    return a, b, 1 - ss_res / ss_tot if ss_tot else 1.0


def by_size(results: Path, prefix: str) -> dict[int, dict[str, Any]]:
    """The results files <prefix>-<nodes>.json, by fleet size."""
    found = {}
    for path in results.glob(f"{prefix}-*.json"):
        match = re.fullmatch(rf"{prefix}-(\d+)\.json", path.name)
        if match:
            found[int(match.group(1))] = load(path)
    return dict(sorted(found.items()))


def facts_sizes(results: Path) -> dict[int, dict[str, Any]]:
    return by_size(results, "facts")


def facts_dra_results(results: Path) -> tuple[int, dict[str, Any]] | None:
    """The facts of the mixed fleet (facts-dra-<nodes>.json), if that run was made."""
    for path in sorted(results.glob("facts-dra-*.json")):
        match = re.fullmatch(r"facts-dra-(\d+)\.json", path.name)
        if match:
            return int(match.group(1)), load(path)
    return None


def floors_table(contenders: list[dict[str, Any]]) -> list[str]:
    """Every contender against the decode floor and the transfer floor; the peers named as such."""
    found = by_name(contenders)
    decode, transfer = found[DECODE_FLOOR]["median"], found[TRANSFER_FLOOR]["median"]
    lines = [
        "| Contender | Median (s) | Min (s) | Max (s) | CPU median (s) | Peak RSS (MB) | Runs | "
        "/ decode floor | / transfer floor |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in contenders:
        ratio = "1.00× (floor)" if c["name"] == DECODE_FLOOR else f"{c['median'] / decode:.2f}×"
        lines.append(row(c, ratio, f" {c['median'] / transfer:.2f}× |"))
    return lines


def counts(figures: dict[str, int]) -> str:
    return ", ".join(f"{k} {v:,}" for k, v in figures.items()) or "none"


def dra_target_lines(floors: dict[str, Any], playbook: dict[str, Any], empty: dict[str, Any]) -> list[str]:
    """The target: ansible-playbook at most 1.2x the decode floor plus the empty play; and the facts that list
    every DRA device (dra_devices=all, as the facts were before) beside it, when that contender ran."""
    decode = floors[DECODE_FLOOR]["median"]
    bound = 1.2 * decode + empty["median"]
    met = "met" if playbook["median"] <= bound else "not met"
    lines = [
        f"Target: ansible-playbook at most 1.2× the decode floor plus the empty play ({decode:.2f} × 1.2 + "
        f"{empty['median']:.2f} = {bound:.2f} s): {playbook['median']:.2f} s, "
        f"{(playbook['median'] - empty['median']) / decode:.2f}× the decode floor with the empty play taken off; {met}."
    ]
    before = find(floors, FACTS_BEFORE_PREFIX)
    if before:
        ref = before["name"].removeprefix(FACTS_BEFORE_PREFIX)
        lines.append(
            f"Before (the same playbook with the collection of `{ref}`, the commit before the facts listed a node's "
            f"DRA devices only where tainted, taken out with `git archive`), in the same rounds: "
            f"{before['median']:.2f} s, {(before['median'] - empty['median']) / decode:.2f}× the decode floor less "
            f"the empty play; after/before {playbook['median'] / before['median']:.2f}× wall, CPU "
            f"{before['cpu_median']:.2f} → {playbook['cpu_median']:.2f} s, "
            f"peak RSS {before['peak_rss_mb']:.0f} → {playbook['peak_rss_mb']:.0f} MB."
        )
    every = floors.get(FACTS_ALL_DRA_DEVICES)
    if every:
        lines.append(
            f"Listing every DRA device with its claims (`dra_devices: all`), the same playbook takes "
            f"{every['median']:.2f} s in the same rounds, "
            f"{(every['median'] - empty['median']) / decode:.2f}× the decode floor less the empty play."
        )
    return lines


def dra_peers_text(contenders: list[dict[str, Any]], facts: dict[str, Any]) -> str:
    """The peers of the DRA section, or that this run left them out."""
    names = by_name(contenders)
    if KUBECTL_PEER not in names and not find(names, K8S_INFO_PEER):
        return (
            "The peers (kubectl, and `kubernetes.core.k8s_info` + Jinja, which cannot see DRA GPUs at all) were "
            "left out of this run (`--no-kubectl`, `--peer-repeat 0`)."
        )
    return (
        "Peers: kubectl, and what an Ansible user writes today, `kubernetes.core.k8s_info` for the nodes and the "
        "active pods plus Jinja adding up `nvidia.com/gpu` (`bench/playbooks/facts_k8s_info.yml`; "
        f"{facts.get('kubernetes_core', '')}, taken from the `ansible` package into a folder of the benchmark's "
        "own by `bench/peers.py`); it cannot see DRA GPUs at all."
    )


def measured_line(data: dict[str, Any]) -> list[str]:
    """When the run began and the machine's load then and at its end, where the results say."""
    if not data.get("started"):
        return []
    loads = data.get("load_average", [])
    load = f" (load average {loads[0]:.1f} at the start" if loads else ""
    load += f", {loads[1]:.1f} at the end)" if len(loads) > 1 else ")" if loads else ""
    rounds = len(data["facts"]["contenders"][0]["walls"])
    return ["", f"Measured from {data['started']}{load}, {rounds} alternating rounds."]


def dra_commands(command: str, nodes: int, fleet: dict[str, Any]) -> list[str]:
    """The commands that made the section: bench.run's, or the fleet, the benchmark and this report's."""
    if command.startswith(".venv/bin/python -m bench.run"):
        return [command]
    return [
        "# a local cluster with bench/fleet.yaml (bench/run.py's ports and state folder, or your own), then:",
        f".venv/bin/python -m bench.fleet_scale --kubeconfig KUBECONFIG --nodes {nodes} "
        f"--pods {fleet.get('pods', 0)} --dra-percent {fleet.get('dra_percent', 50)}",
        command,
        ".venv/bin/python -m bench.report --dra-only",
    ]


def dra_facts_section(results: Path) -> list[str]:
    """The fleet facts on a fleet of device-plugin and DRA nodes, against the floors and the peers."""
    found = facts_dra_results(results)
    if not found:
        return []
    nodes, data = found
    facts = data["facts"]
    fleet = (load(results / "fleet-dra.json") or [{}])[-1]
    contenders = facts["contenders"]
    direct = by_name(contenders)["gpu_node_facts via module_utils"]
    first = (direct["notes"].get("runs") or [{}])[0]
    totals = first.get("totals", {}).get("by_source", {})
    peer = find(by_name(contenders), K8S_INFO_PEER)
    peer_run = (peer["notes"].get("runs") or [{}])[0] if peer else {}
    command = data.get("command", "")
    lines = [
        DRA_SECTION_START,
        f"## Fleet facts at {nodes:,} nodes, half of them DRA nodes",
        "",
        f"`bench/fleet_scale.py --dra-percent {fleet.get('dra_percent', 50)}`: "
        f"{fleet.get('nodes', 0) - fleet.get('dra_nodes', 0):,} "
        "device-plugin nodes as above and "
        f"{fleet.get('dra_nodes', 0):,} DRA GPU nodes, interleaved ({', '.join(f'{k} {v}' for k, v in fleet.get('models', {}).items())}). "
        "A DRA node has no `nvidia.com/gpu` in its status and no GPU Feature Discovery labels; its GPUs are one "
        "ResourceSlice built by `tests/cluster/dra.py` as NVIDIA's DRA driver publishes them (eight H100s, eight "
        "L4s, or eight A100s in static MIG mode as 56 `1g.10gb` devices), and the driver's kubelet-plugin "
        "DaemonSet puts a pod on it. Of its pods, those that fit (at most 12) take one GPU each through the real "
        "kube-scheduler, which allocates their claims: alternately a claim from a ResourceClaimTemplate and a "
        "plain `nvidia.com/gpu: 1` limit served through the `gpu.nvidia.com` DeviceClass (DRA extended "
        "resources); MIG devices through `mig.nvidia.com` claims. "
        f"{fleet.get('pods', 0):,} workload pods, {fleet.get('gpu_pods', 0):,} of them with a GPU "
        f"({fleet.get('dra_gpu_pods', 0):,} through DRA), and {nodes:,} plugin pods; "
        f"{fleet.get('gpu_units', 0):,} device-plugin GPU units and {fleet.get('dra_devices', 0):,} DRA devices. "
        f"Creating the {fleet.get('created_nodes', 0):,} nodes and {fleet.get('created_pods', 0):,} pods the "
        f"fleet still lacked took {fleet.get('node_create_s', 0):.0f} s and {fleet.get('pod_create_s', 0):.0f} s, "
        f"scheduling and settling {fleet.get('settle_s', 0):.0f} s.",
        "",
        "Floors: the pages the module reads (the same lists of nodes, active pods, DeviceClasses, ResourceSlices, "
        "ResourceClaims and DeviceTaintRules, 500 a page, same selectors) over HTTPS with the standard library, "
        "one kept-alive connection per list (`bench/facts_floors.py`): read and dropped undecoded (transfer "
        "floor), or each decoded with `json.loads` and dropped (decode floor). Both are whole processes, "
        "Python start and imports included, as every contender is. " + dra_peers_text(contenders, facts),
        *measured_line(data),
        "",
        "Command:",
        "",
        "```",
        *dra_commands(command, nodes, fleet),
        "```",
        "",
        *floors_table(contenders),
        "",
        f"The module made {first.get('api_requests', '?')} API requests and reported {first.get('nodes', 0):,} GPU "
        f"nodes; by source, device plugin: {counts(totals.get('device_plugin', {}))}; DRA: "
        f"{counts(totals.get('dra', {}))}.",
    ]
    floors = by_name(contenders)
    playbook, empty = floors.get(FACTS_ANSIBLE), floors.get(ANSIBLE_EMPTY)
    if playbook and empty and first.get("result_bytes"):
        lines.append(
            f"The facts are {first['result_bytes'] / 1e6:.1f} MB of JSON (a node's DRA devices listed only where "
            f"they carry a taint, all of them counted); ansible-playbook takes "
            f"{playbook['median'] - direct['median'] - empty['median']:.1f} s more than module_utils and the empty "
            "play together: the result crosses from the module's process to Ansible's as JSON and is decoded, "
            "checked and stored there."
        )
        lines += dra_target_lines(floors, playbook, empty)
    if direct["median"] < floors[DECODE_FLOOR]["median"]:
        lines.append(
            "The module is below the stdlib decode floor: it decodes with orjson where installed (it is, in "
            "`.venv`) and fetches the next page while it projects the current one, where the floors read "
            "page after page."
        )
    if peer_run:
        lines.append(
            f"The k8s_info peer read {peer_run.get('nodes', 0):,} nodes and {peer_run.get('pods', 0):,} pods and "
            f"found {peer_run.get('gpu_nodes', 0):,} GPU nodes with {peer_run.get('allocatable', 0):,} allocatable "
            f"GPUs and {peer_run.get('requested', 0):,} GPUs asked for in pod limits: it misses the DRA nodes, "
            "their devices and the pods that hold them through claims, and counts the `nvidia.com/gpu` limits "
            "served through DRA against no node's allocatable."
        )
    lines += ["", DRA_SECTION_END]
    return lines


def with_section(
    text: str, section: list[str], start: str = DRA_SECTION_START, end: str = DRA_SECTION_END, before: str = "Labeling"
) -> str:
    """The report with the section between `start` and `end` put in place of the old one, or before the
    heading that begins with `before`, or at the end."""
    block = "\n".join(section)
    if start in text and end in text:
        head, rest = text.split(start, 1)
        return head + block + rest.split(end, 1)[1]
    marker = f"\n## {before}"
    if marker in text:
        head, tail = text.split(marker, 1)
        return head + block + "\n" + marker + tail
    return text.rstrip("\n") + "\n\n" + block + "\n"


def marked_blocks(text: str, start: str, end: str) -> list[str]:
    """Every block of `text` from a line that begins with the `start` marker to the next line that is the
    `end` marker, the markers included (a marker quoted inside a line is no marker)."""
    pattern = re.compile(rf"^{re.escape(start)}.*?^{re.escape(end)}$", re.MULTILINE | re.DOTALL)
    return pattern.findall(text)


def carried_over(old: str, dra_written: bool, scale_written: bool) -> list[str]:
    """What a full run keeps of the report it replaces: every hand-written section (between the
    HAND_WRITTEN markers), and the DRA and scale sections where this run wrote none of its own."""
    blocks = [] if dra_written else marked_blocks(old, DRA_SECTION_START, DRA_SECTION_END)
    blocks += [] if scale_written else marked_blocks(old, SCALE_SECTION_START, SCALE_SECTION_END)
    return blocks + marked_blocks(old, HAND_WRITTEN_START, HAND_WRITTEN_END)


def scale_results(results: Path) -> dict[int, dict[str, Any]]:
    """bench/scale.py's runs, by fleet size."""
    return by_size(results, "scale")


def scale_section(runs: dict[int, dict[str, Any]]) -> list[str]:
    """The facts at each size of the scale run, against the floors, with the fitted lines and the targets."""
    medians = {name: [] for name in (TRANSFER_FLOOR, DECODE_FLOOR, FACTS_DIRECT, FACTS_ANSIBLE, ANSIBLE_EMPTY)}
    cpus: dict[str, list[float]] = {name: [] for name in (DECODE_FLOOR, FACTS_DIRECT)}
    rows = []
    for nodes, run in runs.items():
        found = by_name(run["facts"]["contenders"])
        fleet = run["fleet"]
        for name, values in medians.items():
            values.append(found[name]["median"])
        for name, values in cpus.items():
            values.append(found[name]["cpu_median"])
        decode, direct, playbook = found[DECODE_FLOOR], found[FACTS_DIRECT], found[FACTS_ANSIBLE]
        kubectl = found.get(KUBECTL_PEER)
        first = (direct["notes"].get("runs") or [{}])[0]
        playbook_less_empty = playbook["median"] - found[ANSIBLE_EMPTY]["median"]
        cells = (
            f"{nodes:,}",
            f"{fleet['pods'] + nodes:,}",
            f"{fleet['gpu_pods']:,}",
            s(found[TRANSFER_FLOOR]["median"]),
            s(decode["median"]),
            s(direct["median"]),
            f"{direct['median'] / decode['median']:.2f}×",
            s(decode["cpu_median"]),
            s(direct["cpu_median"]),
            s(playbook["median"]),
            f"{playbook_less_empty / decode['median']:.2f}×",
            s(kubectl["median"]) if kubectl else "–",
            mb(direct["peak_rss_mb"]),
            mb(decode["peak_rss_mb"]),
            mb(playbook["peak_rss_mb"]),
            f"{first.get('result_bytes', 0) / 1e6:.1f}",
            str(first.get("api_requests", "?")),
        )
        rows.append("| " + " | ".join(cells) + " |")
    sizes = [float(n) for n in runs]
    largest = max(runs)
    top = by_name(runs[largest]["facts"]["contenders"])
    ratio = top[FACTS_DIRECT]["median"] / top[DECODE_FLOOR]["median"]
    rss = top[FACTS_DIRECT]["peak_rss_mb"]
    fits = {name: fit_line(sizes, values) for name, values in medians.items() if name != ANSIBLE_EMPTY}
    cpu_fits = {name: fit_line(sizes, values) for name, values in cpus.items()}
    direct_fit = cpu_fits[FACTS_DIRECT]
    started = runs[min(runs)].get("started", "")
    load = runs[largest].get("machine", {}).get("load_average_start", [0.0])[0]
    rounds = len(runs[largest]["facts"]["contenders"][0]["walls"])
    lines = [
        SCALE_SECTION_START,
        f"## Fleet facts at scale: {min(runs):,} to {largest:,} nodes",
        "",
        f"Measured from {started} on the benchmark cluster (load average {load:.1f} at the largest size), the "
        "fleet grown size by size by `bench/fleet_scale.py` as in the sections above (20 workload pods a node, "
        "one device-plugin pod a node; KWOK heartbeating every node and keeping every pod Running), "
        f"{rounds} alternating rounds at each size. The floors and the contenders are those of the 1,000-node "
        "section; kubectl only where the row names it (at 100,000 pods it prints about a gigabyte of JSON). "
        "Pods: workload and device-plugin pods.",
        "",
        "Command:",
        "",
        "```",
        "make bench-scale",
        "# that is: .venv/bin/python -m bench.scale --sizes " + ",".join(str(n) for n in runs) + " --repeat 3",
        "```",
        "",
        "| " + " | ".join(SCALE_COLUMNS) + " |",
        "|" + "---:|" * len(SCALE_COLUMNS),
        *rows,
        "",
        "Least-squares lines through the medians (seconds against nodes), wall time:",
        "",
        *(f"- {name}: {a:.2f} s + {b * 1000:.2f} s per 1,000 nodes, R² {r2:.3f}" for name, (a, b, r2) in fits.items()),
        "",
        "and CPU time (user + system of the process: the work itself, whatever else the machine does):",
        "",
        *(
            f"- {name}: {a:.2f} s + {b * 1000:.2f} s per 1,000 nodes, R² {r2:.3f}"
            for name, (a, b, r2) in cpu_fits.items()
        ),
        "",
        "| Target at the largest size | Measured | |",
        "|---|---|---|",
        f"| module_utils ≤ {TARGET_FACTS}× the decode floor at {largest:,} nodes | {ratio:.2f}× "
        f"({s(top[FACTS_DIRECT]['median'])} s vs {s(top[DECODE_FLOOR]['median'])} s) | "
        f"{verdict(ratio <= TARGET_FACTS)} |",
        f"| Linear cost (module_utils CPU time) | {direct_fit[0]:.2f} s + {direct_fit[1] * 1000:.2f} s per 1,000 "
        f"nodes, R² {direct_fit[2]:.3f} | {verdict(direct_fit[2] >= 0.98)} |",
        f"| Peak memory under {TARGET_SCALE_RSS_MB:.0f} MB | {mb(rss)} MB | {verdict(rss < TARGET_SCALE_RSS_MB)} |",
        "",
        f"![Facts time and memory against fleet size]({PLOT})",
        "",
        SCALE_SECTION_END,
    ]
    return lines


def plot(sizes: dict[int, dict[str, Any]], fleet: list[dict[str, Any]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nodes = list(sizes)
    pods = {f["nodes"]: f["pods"] for f in fleet or []}
    fig, (left, middle, right) = plt.subplots(1, 3, figsize=(16, 4.8), gridspec_kw={"width_ratios": [3, 2, 2]})
    series = (
        (DECODE_FLOOR, "decode floor: json.loads of the module's pages", "black", "s"),
        (KUBECTL_PEER, "kubectl get nodes + pods -A -o json (peer)", "grey", "x"),
        (FACTS_DIRECT, "gpu_node_facts, module_utils", "tab:blue", "o"),
        (FACTS_ANSIBLE, "gpu_node_facts, ansible-playbook", "tab:orange", "^"),
    )
    for name, label, colour, marker in series:
        measured = [n for n in nodes if name in by_name(sizes[n]["facts"]["contenders"])]
        if not measured:
            continue
        contenders = [by_name(sizes[n]["facts"]["contenders"])[name] for n in measured]
        medians = [c["median"] for c in contenders]
        low = [c["median"] - c["min"] for c in contenders]
        high = [c["max"] - c["median"] for c in contenders]
        left.errorbar(measured, medians, yerr=[low, high], label=label, color=colour, marker=marker, capsize=4)
        if name == DECODE_FLOOR:
            left.plot(
                measured,
                [m * TARGET_FACTS for m in medians],
                color="grey",
                linestyle="--",
                label=f"{TARGET_FACTS}× floor (target)",
            )
        middle.plot(measured, [c["cpu_median"] for c in contenders], label=label, color=colour, marker=marker)
        right.plot(measured, [c["peak_rss_mb"] for c in contenders], label=label, color=colour, marker=marker)
    left.set_xlabel("GPU nodes (pods: " + ", ".join(f"{pods.get(n, 0):,}" for n in nodes) + ")")
    left.set_ylabel("wall time, s (median; bars: min–max)")
    left.set_title("Fleet facts: time against fleet size")
    left.set_xlim(0, max(nodes) * 1.05)
    left.set_ylim(0, None)
    left.grid(True, alpha=0.3)
    left.legend(fontsize=8)
    middle.set_title("CPU time (the process's own work)")
    middle.set_ylabel("user + system CPU, s (median)")
    right.set_title("Peak memory")
    right.set_ylabel("peak RSS, MB (log scale)")
    right.set_yscale("log")
    for panel in (middle, right):
        panel.set_xlabel("GPU nodes")
        panel.set_xlim(0, max(nodes) * 1.05)
        panel.grid(True, alpha=0.3)
        panel.legend(fontsize=7)
    middle.set_ylim(0, None)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def machine_section(m: dict[str, Any]) -> list[str]:
    return [
        "## Machine and versions",
        "",
        "| | |",
        "|---|---|",
        f"| CPUs (`nproc`) | {m['nproc']} ({m['cpu']}) |",
        f"| Memory | {m['memory_gib']} GiB |",
        f"| Kernel | {m['kernel']} |",
        f"| Python | {m['python']} |",
        f"| ansible-core | {m['ansible_core']} |",
        f"| kubernetes (Python client) | {m['kubernetes_python']} |",
        f"| PyYAML | {m['pyyaml']} |",
        f"| kube-apiserver, kubectl | {m['kubernetes']} ({m['kubectl']}) |",
        f"| etcd, KWOK | {m['etcd']}, {m['kwok']} |",
        f"| checkov | {m['checkov']} |",
        f"| Load average at start, end | {', '.join(f'{x:.1f}' for x in m['load_average_start'])}; "
        f"{', '.join(f'{x:.1f}' for x in m.get('load_average_end', []))} |",
        f"| Run | {m['started']}, {m.get('duration_s', 0) // 60} min |",
        "",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=HERE / "results")
    parser.add_argument("--docs", type=Path, default=HERE.parent / "docs")
    parser.add_argument(
        "--dra-only",
        action="store_true",
        help="only put the mixed fleet's facts section (facts-dra-<nodes>.json) into the existing report",
    )
    parser.add_argument(
        "--scale-only",
        action="store_true",
        help="only put the scale run's section (scale-<nodes>.json) into the existing report, and draw the plot",
    )
    args = parser.parse_args()
    if args.scale_only:
        report = args.docs / "benchmarks.md"
        runs = scale_results(args.results)
        if not runs:
            raise SystemExit(f"no scale-<nodes>.json in {args.results}")
        section = scale_section(runs)
        report.write_text(
            with_section(report.read_text(), section, SCALE_SECTION_START, SCALE_SECTION_END, "Fleet facts against")
        )
        plot(runs, [run["fleet"] for run in runs.values()], args.docs / PLOT)
        print(f"wrote the scale section of {report} and {args.docs / PLOT}")
        return 0
    if args.dra_only:
        report = args.docs / "benchmarks.md"
        section = dra_facts_section(args.results)
        if not section:
            raise SystemExit(f"no facts-dra-<nodes>.json in {args.results}")
        report.write_text(with_section(report.read_text(), section))
        print(f"wrote the DRA section of {report}")
        return 0
    m = load(args.results / "machine.json")
    scale = scale_results(args.results)  # when bench/scale.py ran, the plot is drawn from its sizes
    validate = load(args.results / "validate.json")
    fleet = load(args.results / "fleet.json") or []
    sizes = facts_sizes(args.results)
    args.docs.mkdir(parents=True, exist_ok=True)

    lines = ["# Benchmarks", ""]
    lines += [
        "Fleet facts, node labeling and manifest validation at scale, each timed beside its baseline in the "
        "same run on the same data: repetitions alternate between the contenders, rotating the order each "
        "round, so a slow spell of the machine hits them alike. Every contender runs as its own process; "
        "wall time is reported as median, min and max, CPU as user + system of the process tree, memory as "
        "the command's own peak RSS (GNU time's `%M`: the largest process of its tree). Written by "
        "`bench/report.py` from the results of the run below, except: the sections marked hand-written "
        "(each names its own command and date), carried over unchanged from the report this one replaced, "
        "as are the DRA and scale sections when this run made none; and the analysis section, "
        "`bench/analysis.md` as it stands.",
        "",
        "Command (see `bench/README.md`):",
        "",
        "```",
        m["command"],
        "```",
        "",
    ]
    if m.get("quick"):
        lines += ["> **Smoke run at reduced sizes: these numbers are not the benchmark.**", ""]
    lines += machine_section(m)

    # --- targets --------------------------------------------------------------------------
    targets: list[str] = []
    largest = max(sizes) if sizes else None
    facts_top = by_name(sizes[largest]["facts"]["contenders"]) if largest else {}
    labels = sizes[largest].get("labels") if largest else None
    if facts_top:
        floor = facts_top[DECODE_FLOOR]["median"]
        fixed = facts_top[ANSIBLE_EMPTY]["median"] if ANSIBLE_EMPTY in facts_top else 0.0
        for name, allowance, plus in ((FACTS_DIRECT, 0.0, ""), (FACTS_ANSIBLE, fixed, " + empty play")):
            ratio = (facts_top[name]["median"] - allowance) / floor
            targets.append(
                f"| Facts at {largest:,} nodes, {name.split(' via ')[1]} | ≤ {TARGET_FACTS}× decode floor{plus} | "
                f"{ratio:.2f}× ({s(facts_top[name]['median'])} s{f' less {s(allowance)} s' if plus else ''} vs "
                f"{s(floor)} s) | {verdict(ratio <= TARGET_FACTS)} |"
            )
        if len(sizes) >= 3:
            xs = [float(n) for n in sizes]
            ys = [by_name(sizes[n]["facts"]["contenders"])[FACTS_DIRECT]["median"] for n in sizes]
            a, b, r2 = fit_line(xs, ys)
            targets.append(
                f"| Facts cost growth, module_utils | linear | {a:.2f} s + {b * 1000:.2f} s per 1,000 nodes, "
                f"R² {r2:.3f} | {verdict(r2 >= 0.98)} |"
            )
        rss = [by_name(sizes[n]["facts"]["contenders"])[FACTS_DIRECT]["peak_rss_mb"] for n in sizes]
        pods_mb = sizes[largest]["facts"]["sizes"]["pods_json_bytes"] / 1e6
        first_size = min(sizes)
        fleet_growth = largest / first_size
        rss_growth = rss[-1] / rss[0]
        targets.append(
            f"| Facts memory, module_utils | bounded: grows far less than the fleet | "
            f"{' → '.join(mb(r) for r in rss)} MB at {', '.join(f'{n:,}' for n in sizes)} nodes, "
            f"{rss_growth:.2f}× for {fleet_growth:.0f}× the fleet (the pod list as kubectl prints it: "
            f"{pods_mb:,.0f} MB) | {verdict(fleet_growth > 1 and rss_growth < 1 + (fleet_growth - 1) / 4)} |"
        )
    if labels:
        lab = by_name(labels["contenders"])
        mc, kc = (
            find(lab, "gpu_node_label via ansible-playbook, cold"),
            find(lab, "kubectl label nodes -l <model> --overwrite, per model, cold"),
        )
        mw = find(lab, "gpu_node_label via ansible-playbook, warm")
        if mc and kc:
            targets.append(
                f"| Labels cold, {labels['nodes']:,} nodes | faster than bulk kubectl label | "
                f"{s(mc['median'])} s vs {s(kc['median'])} s "
                f"(kubectl takes {kc['median'] / mc['median']:.2f}× as long) | "
                f"{verdict(mc['median'] < kc['median'])} |"
            )
        if mw:
            writes = mw["notes"].get("module_writes", [])
            server = mw["notes"].get("server_patches", [])
            targets.append(
                f"| Labels warm | 0 writes, < {TARGET_WARM_S:.0f} s | writes {max(writes)} (server: "
                f"{max(server)} node PATCHes), {s(mw['median'])} s (max {s(mw['max'])}) | "
                f"{verdict(max(writes) == 0 and max(server) == 0 and mw['median'] < TARGET_WARM_S)} |"
            )
    if validate:
        val = validate["contenders"]
        ours, floor_c = val[0], val[1]
        checkov = find(by_name(val), "checkov")
        parallel = find(by_name(val), "gpu-pod-validate --jobs")
        if checkov:
            speed = checkov["median"] / ours["median"]
            targets.append(
                f"| Validation vs checkov | ≥ {TARGET_CHECKOV:.0f}× faster | {speed:.0f}× "
                f"({s(ours['median'])} s vs {s(checkov['median'])} s) | {verdict(speed >= TARGET_CHECKOV)} |"
            )
        ratio = ours["median"] / floor_c["median"]
        targets.append(
            f"| Validation vs YAML parse floor | ≤ {TARGET_PARSE:.0f}× | {ratio:.2f}× ({s(ours['median'])} s vs "
            f"{s(floor_c['median'])} s) | {verdict(ratio <= TARGET_PARSE)} |"
        )
        if parallel:
            ratio = parallel["median"] / floor_c["median"]
            targets.append(
                f"| Validation {parallel['name'].removeprefix('gpu-pod-validate ')} vs the single-core parse floor | "
                f"≤ {TARGET_PARALLEL_PARSE:.2f}× | {ratio:.2f}× ({s(parallel['median'])} s vs "
                f"{s(floor_c['median'])} s) | {verdict(ratio <= TARGET_PARALLEL_PARSE)} |"
            )
        if checkov:
            targets.append(
                f"| Validation memory | well under checkov's | {mb(ours['peak_rss_mb'])} MB vs "
                f"{mb(checkov['peak_rss_mb'])} MB | {verdict(ours['peak_rss_mb'] * 4 < checkov['peak_rss_mb'])} |"
            )
    lines += ["## Targets", "", "| What | Target | Measured | |", "|---|---|---|---|", *targets, ""]

    # --- fleet ------------------------------------------------------------------------------
    if fleet:
        last = fleet[-1]
        lines += [
            "## The simulated fleet",
            "",
            "A separate local cluster (`tests/cluster/cluster.py`: etcd, kube-apiserver, kube-controller-manager, "
            "kube-scheduler and KWOK on 127.0.0.1) with the base fleet of `bench/fleet.yaml`, scaled by "
            "`bench/fleet_scale.py`: KWOK GPU nodes of six models as their providers label them, "
            + ", ".join(f"{k} {v}" for k, v in last["models"].items())
            + f" at {last['nodes']:,} nodes; {last['pods'] // last['nodes']} pods per node bound by `spec.nodeName` "
            "in 20 namespaces, of which those that fit the node's GPU units request one GPU each, the rest CPU "
            "only; plus one device-plugin pod per node from the DaemonSet. KWOK keeps every node Ready (node "
            "leases) and every pod Running while the benchmark runs.",
            "",
            "| Nodes | Workload pods | of which request a GPU | Device-plugin pods | GPU units | "
            "`kubectl get pods -A -o json` | `kubectl get nodes -o json` | Pods created in | Settled in |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for f in fleet:
            size = sizes.get(f["nodes"], {}).get("facts", {}).get("sizes", {})
            lines.append(
                f"| {f['nodes']:,} | {f['pods']:,} | {f['gpu_pods']:,} ({f['gpu_pods'] / f['pods']:.0%}) | "
                f"{f['nodes']:,} | "
                f"{f['gpu_units']:,} | {size.get('pods_json_bytes', 0) / 1e6:,.0f} MB | "
                f"{size.get('nodes_json_bytes', 0) / 1e6:,.1f} MB | {f['pod_create_s']:.0f} s | {f['settle_s']:.0f} s |"
            )
        lines.append("")

    # --- facts --------------------------------------------------------------------------------
    header = [
        "| Contender | Median (s) | Min (s) | Max (s) | CPU median (s) | Peak RSS (MB) | Runs | Ratio to baseline |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    if facts_top:
        direct_runs = facts_top[FACTS_DIRECT]["notes"].get("runs", [{}])
        first = direct_runs[0] if direct_runs else {}
        lines += [
            f"## Fleet facts at {largest:,} nodes",
            "",
            "Baselines: the floors, the pages the module reads over HTTPS with the standard library "
            "(`bench/facts_floors.py`), dropped undecoded (transfer floor) or each decoded with `json.loads` "
            "and dropped (decode floor); peers: `kubectl get nodes -o json` followed by `kubectl get pods -A "
            "-o json`, output discarded, and `kubernetes.core.k8s_info` + Jinja (`bench/playbooks/"
            "facts_k8s_info.yml`), run after the alternating rounds. `gpu_node_facts` lists the nodes and the active pods "
            f"(`{'status.phase!=Succeeded,status.phase!=Failed'}`), 500 a page, keeps a compact projection "
            "of each, and returns the facts; the module_utils run is `bench/facts_direct.py` (the module's "
            "`read_fleet` and `summarise`, and the JSON it would return), its peak RSS is the module's memory.",
            "",
            *floors_table(sizes[largest]["facts"]["contenders"]),
        ]
        lines += [
            "",
            f"The module made {first.get('api_requests', '?')} API requests, reported "
            f"{first.get('nodes', '?'):,} GPU nodes, {first.get('gpu_pods', '?'):,} GPU pods and "
            f"{first.get('plugin_pods', '?'):,} device-plugin pods, and returned "
            f"{first.get('result_bytes', 0) / 1e6:.1f} MB of JSON.",
            "",
        ]
        lines += [
            "## Fleet facts against fleet size",
            "",
            *([] if scale else [f"![Facts time and memory against fleet size]({PLOT})", ""]),
            "| Nodes | Pods | module_utils (s) | ansible-playbook (s) | decode floor (s) | module_utils / floor | "
            "ansible-playbook / floor | module_utils peak RSS (MB) | kubectl peak RSS (MB) |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        pods_of = {f["nodes"]: f["pods"] for f in fleet}
        for n, data in sizes.items():
            c = by_name(data["facts"]["contenders"])
            fl = c[DECODE_FLOOR]["median"]
            lines.append(
                f"| {n:,} | {pods_of.get(n, 0):,} | {s(c[FACTS_DIRECT]['median'])} | {s(c[FACTS_ANSIBLE]['median'])} | "
                f"{s(fl)} | {c[FACTS_DIRECT]['median'] / fl:.2f}× | {c[FACTS_ANSIBLE]['median'] / fl:.2f}× | "
                f"{mb(c[FACTS_DIRECT]['peak_rss_mb'])} | {mb(c[KUBECTL_PEER]['peak_rss_mb'])} |"
            )
        lines.append("")
        if len(sizes) >= 2:
            fits = []
            for name, label in (
                (FACTS_DIRECT, "module_utils"),
                (FACTS_ANSIBLE, "ansible-playbook"),
                (DECODE_FLOOR, "decode floor"),
                (KUBECTL_PEER, "kubectl"),
            ):
                xs = [float(n) for n in sizes]
                ys = [by_name(sizes[n]["facts"]["contenders"])[name]["median"] for n in sizes]
                a, b, r2 = fit_line(xs, ys)
                fits.append(f"{label} {a:.2f} s + {b * 1000:.2f} s per 1,000 nodes (R² {r2:.3f})")
            lines += ["Least-squares lines through the medians: " + "; ".join(fits) + ".", ""]

    # --- labels -------------------------------------------------------------------------------
    if labels:
        lab = labels["contenders"]
        kc = find(by_name(lab), "kubectl label nodes -l <model> --overwrite, per model, cold")
        kw = find(by_name(lab), "kubectl label nodes -l <model> --overwrite, per model, warm")
        lines += [
            f"## Labeling {labels['nodes']:,} nodes",
            "",
            "Baseline: what a person would run, one bulk `kubectl label nodes -l <model label>=<model> "
            f"accelerator=<value> --overwrite` per model ({labels['label_commands']} commands, run one "
            "after another). Cold: the `accelerator` label and the module's ownership annotation are "
            "stripped from every node first (untimed), so every node changes. Warm: the same again at "
            "once, nothing changes. Writes: the module's own count (`writes`), and on the API server the "
            "increase of `apiserver_request_total` for PATCH on nodes without subresource.",
            "",
            "| Contender | Median (s) | Min (s) | Max (s) | CPU median (s) | Peak RSS (MB) | Runs | "
            "Ratio to baseline | Module writes | Server node PATCHes |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for c in lab:
            base = kc if "cold" in c["name"] else kw
            is_base = c is base
            writes = c["notes"].get("module_writes")
            lines.append(
                row(
                    c,
                    "1.00× (baseline)" if is_base else f"{c['median'] / base['median']:.2f}×",
                    f" {', '.join(map(str, writes)) if writes else '–'} | "
                    f"{', '.join(map(str, c['notes'].get('server_patches', [])))} |",
                )
            )
        lines.append("")

    # --- validation -------------------------------------------------------------------------
    if validate:
        corpus = validate["corpus"]
        val = validate["contenders"]
        floor_c = val[1]
        lines += [
            "## Manifest validation",
            "",
            f"A generated corpus (`bench/validate_corpus.py`): {corpus.get('deployments') or 0:,} Deployments "
            f"and one ConfigMap per file in {corpus['files']} multi-document files, {corpus['documents']:,} "
            f"documents, {corpus['bytes'] / 1e6:.0f} MB; 87% CPU services, 10% proper GPU users, 3% scheduler "
            "bypasses. Baselines: only parsing every document with PyYAML's C loader (the floor), and "
            "checkov's Kubernetes framework on the same folder (`checkov -d DIR --framework kubernetes "
            f"--quiet --compact --skip-download`), run {validate.get('checkov_repeat', 0)} time(s): a "
            "single run takes minutes.",
            "",
            *header,
        ]
        for c in val:
            if c is floor_c:
                ratio = "1.00× (floor)"
            elif c["name"].startswith("checkov"):
                ratio = (
                    f"{c['median'] / floor_c['median']:.1f}× floor; "
                    f"{c['median'] / val[0]['median']:.0f}× gpu-pod-validate"
                )
            else:
                ratio = f"{c['median'] / floor_c['median']:.2f}× floor"
            lines.append(row(c, ratio))
        lines.append("")

    dra_section = dra_facts_section(args.results)
    if dra_section:
        lines += [*dra_section, ""]
    if scale:
        lines += [*scale_section(scale), ""]
    previous = args.docs / "benchmarks.md"
    if previous.exists():
        lines += [f"{block}\n" for block in carried_over(previous.read_text(), bool(dra_section), bool(scale))]

    analysis = HERE / "analysis.md"
    if analysis.exists():
        lines += [analysis.read_text().strip(), ""]
    if largest and sizes[largest].get("facts_profile"):
        lines += [
            f"## Appendix: cProfile of the module_utils facts run at {largest:,} nodes",
            "",
            "From `bench/facts_direct.py --profile`, top functions by internal time, then by cumulative time.",
            "",
            "```",
            *[
                line.rstrip()
                for line in sizes[largest]["facts_profile"].strip().splitlines()
                if line.strip() and not line.startswith(("   Ordered by", "   List reduced"))
            ],
            "```",
            "",
        ]
    if largest and sizes[largest].get("labels_warm_profile"):
        lines += [
            f"## Appendix: cProfile of a warm module_utils label run at {largest:,} nodes",
            "",
            "From `bench/label_direct.py --profile` on the labeled fleet (nothing to write).",
            "",
            "```",
            *[
                line.rstrip()
                for line in sizes[largest]["labels_warm_profile"].strip().splitlines()
                if line.strip() and not line.startswith(("   Ordered by", "   List reduced"))
            ],
            "```",
            "",
        ]
    (args.docs / "benchmarks.md").write_text("\n".join(lines))
    if scale:
        plot(scale, [run["fleet"] for run in scale.values()], args.docs / PLOT)
    elif sizes:
        plot(sizes, fleet, args.docs / PLOT)
    print(f"wrote {args.docs / 'benchmarks.md'}" + (f" and {args.docs / PLOT}" if sizes or scale else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
