# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_node_label without Ansible: the calls the module makes with its default options.

The client, the module's `read_nodes` (one paginated node list), `plan_nodes`, `apply_plans`
(merge patches, 16 at a time) and `summarize`, and the JSON of the result. Prints a one-line
JSON summary; with --profile, writes a cProfile of the whole run.

    python -m bench.label_direct --kubeconfig PATH [--profile OUT.pstats]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import sys
import time


def label(kubeconfig: str) -> dict:
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.models import DEFAULT_MODEL_LABEL_KEYS
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import gpu_resource_matcher
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import client_from_params
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.labels.apply import apply_plans, summarize
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.labels.plan import (
        DEFAULT_LABEL_KEY,
        build_options,
        plan_node,
        plan_nodes,
    )
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.labels.reads import (
        patch_node,
        read_nodes,
        reread_node,
    )

    options = build_options(DEFAULT_LABEL_KEY, list(DEFAULT_MODEL_LABEL_KEYS), None, False, "skip", False)
    is_gpu = gpu_resource_matcher()
    client = client_from_params({"kubeconfig": kubeconfig})
    nodes, _missing = read_nodes(client, None, None)
    plans = plan_nodes(nodes, options, is_gpu)
    results = apply_plans(
        plans,
        send=lambda name, patch: patch_node(client, name, patch),
        reread=lambda name: reread_node(client, name),
        replan=lambda node: plan_node(node, options, is_gpu),
        parallelism=16,
        errors=(ClusterError,),
    )
    summary = summarize(results, options.label_key)
    text = json.dumps(summary)
    return {
        "writes": client.write_count,
        "api_requests": client.request_count,
        "counts": summary["counts"],
        "result_bytes": len(text),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--profile", help="write a cProfile of the run here")
    args = parser.parse_args()
    started = time.perf_counter()
    if args.profile:
        profiler = cProfile.Profile()
        summary = profiler.runcall(label, args.kubeconfig)
        profiler.dump_stats(args.profile)
    else:
        summary = label(args.kubeconfig)
    summary["seconds"] = round(time.perf_counter() - started, 3)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
