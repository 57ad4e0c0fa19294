# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The command line of gpu_placement_info (scripts/gpu-placement): would these manifests' GPU pods fit
now, and where; the view per pool; why the pending GPU pods wait. The manifest reader and the DRA
reads are handed in by the script, which wires them from the validator and the fleet facts."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, BinaryIO, TextIO

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import NVIDIA_GPU, gpu_resource_matcher
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import client_from_params
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import KubegpuError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.options import placement_options
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.reads import ReadDra, read_placement
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.summary import what_if_summary

EXIT_OK, EXIT_UNFIT, EXIT_USAGE = 0, 1, 2
LoadManifests = Callable[..., Any]  # (paths, stdin) -> documents, with `errors` once iterated


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpu-placement",
        description="Would the GPU pods of these manifests fit on the cluster now, and where; where GPU work fits "
        "per pool; why pending GPU pods wait. Reads the cluster of --kubeconfig (or K8S_AUTH_KUBECONFIG, KUBECONFIG).",
    )
    parser.add_argument("paths", nargs="*", help="manifest files, directories or globs; - for standard input")
    parser.add_argument("--kubeconfig")
    parser.add_argument("--context")
    parser.add_argument("--sizes", default="1,2,4,8", help="GPUs per pod for the view (default 1,2,4,8)")
    parser.add_argument("--resource", default=NVIDIA_GPU)
    parser.add_argument("--pool-label", action="append", default=[], help="a node label that splits pools")
    parser.add_argument("--cpu", help="CPU per pod of the view's shape")
    parser.add_argument("--memory", help="memory per pod of the view's shape")
    parser.add_argument(
        "--toleration", action="append", default=[], help="KEY[=VALUE][:EFFECT] the view's pods tolerate"
    )
    parser.add_argument("--pending", action="store_true", help="also explain the pending GPU pods")
    parser.add_argument("--json", dest="json_file", help="write the whole result here as JSON")
    parser.add_argument("--page-size", type=int, default=500)
    return parser


def toleration(text: str) -> dict[str, str]:
    pair, _colon, effect = text.partition(":")
    key, equals, value = pair.partition("=")
    return {"key": key, "operator": "Equal" if equals else "Exists", "value": value, "effect": effect}


def _options(args: argparse.Namespace) -> Any:
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        raise KubegpuError(f"--sizes must be whole numbers separated by commas, not {args.sizes!r}") from None
    shape = {"cpu": args.cpu, "memory": args.memory, "tolerations": [toleration(t) for t in args.toleration]}
    return placement_options(sizes, args.resource, pool_label_keys=args.pool_label, shape=shape)


def format_text(result: Mapping[str, Any]) -> str:
    lines = []
    sizes = [str(s) for s in result["sizes"]]
    lines.append(f"{'pool':<40} {'free':>5} {'largest':>7} " + " ".join(f"{s + '-GPU':>7}" for s in sizes))
    for pool in [*result["pools"], result["fleet"]]:
        fits = " ".join(f"{pool['fits'][s]['pods']:>7}" for s in sizes)
        lines.append(f"{pool['pool']:<40} {pool['gpus_free']:>5} {pool['largest']:>7} {fits}")
    lines += [f"{f['severity']}: {f['message']}" for f in result["findings"]]
    for entry in result.get("pending", []):
        lines.append(f"pending {entry['pod']}: {entry['reason']}")
    for entry in result.get("what_if", []):
        where = ", ".join(f"{node} ({count})" for node, count in entry["fits_on"].items())
        verdict = f"fits ({entry['pods_that_fit']} pod(s) of it fit: {where})" if entry["fits"] else entry["reason"]
        lines.append(f"{entry['object']} x{entry['replicas']}, {entry['gpus']} GPU(s) each: {verdict}")
    lines += [f"note: {n}" for n in result["notes"]]
    return "\n".join(lines)


def evaluate(
    args: argparse.Namespace, read_dra: ReadDra, load: LoadManifests, stdin: BinaryIO | None
) -> dict[str, Any]:
    options = _options(args)
    is_gpu = gpu_resource_matcher([args.resource])
    client = client_from_params({"kubeconfig": args.kubeconfig, "context": args.context})
    fleet, result = read_placement(client, options, is_gpu, read_dra, args.page_size, args.pending)
    del result["nodes"]
    if args.paths:
        manifests = load(args.paths, stdin)
        result.update(what_if_summary(manifests, fleet, is_gpu))
        result["errors"] = [e.to_dict() for e in manifests.errors]
    return result


def run(
    read_dra: ReadDra,
    load: LoadManifests,
    argv: Sequence[str] | None = None,
    streams: tuple[TextIO, TextIO, BinaryIO | None] | None = None,
) -> int:
    stdout, stderr, stdin = streams or (sys.stdout, sys.stderr, sys.stdin.buffer)
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        result = evaluate(args, read_dra, load, stdin)
        if args.json_file:
            with open(args.json_file, "w", encoding="utf-8") as out:
                json.dump(result, out, indent=1)
    except (KubegpuError, OSError) as exc:
        stderr.write(f"gpu-placement: error: {getattr(exc, 'message', None) or exc}\n")
        return EXIT_USAGE
    stdout.write(format_text(result) + "\n")
    errors: Iterable[Mapping[str, Any]] = result.get("errors", [])
    for error in errors:
        stderr.write(f"gpu-placement: {error['source']}: {error['message']}\n")
    return EXIT_UNFIT if any(not e["fits"] for e in result.get("what_if", [])) else EXIT_OK
