# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_node_facts without Ansible: the calls the module makes, in this process.

The client from the connection options, the options from the module's defaults, the module's
own `read_fleet` (one paginated list each of nodes, pods and the DRA objects), `summarise`, and the JSON
the module would hand back. Prints a one-line JSON summary; with --profile, writes a cProfile
of the whole run.

    python -m bench.facts_direct --kubeconfig PATH [--page-size 500] [--profile OUT.pstats]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import resource
import sys
import time


def read_facts(kubeconfig: str, page_size: int) -> tuple[dict, dict[str, int]]:
    """The module's run(): the facts, and how many nodes, GPU pods and plugin pods were read."""
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.facts import summarise
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.reads import read_fleet
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import options_from_params
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import client_from_params

    client = client_from_params({"kubeconfig": kubeconfig})
    options = options_from_params()
    nodes, pods, plugins, dra = read_fleet(client, options, None, None, page_size)
    result = summarise(nodes, pods, plugins, options, dra)
    result["api_requests"] = client.request_count
    return result, {"nodes": len(nodes), "gpu_pods": len(pods), "plugin_pods": len(plugins)}


def facts(kubeconfig: str, page_size: int) -> dict:
    # As in the module, what was read is released before the result is made JSON (exit_json).
    result, read = read_facts(kubeconfig, page_size)
    text = json.dumps({"changed": False, "ansible_facts": {"gpu_fleet": result}})
    totals = result.get("totals") or {}
    return {
        **read,
        "api_requests": result["api_requests"],
        "result_bytes": len(text),
        "totals": totals if isinstance(totals, dict) else {},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--page-size", type=int, default=500)
    parser.add_argument("--profile", help="write a cProfile of the run here")
    args = parser.parse_args()
    started = time.perf_counter()
    if args.profile:
        profiler = cProfile.Profile()
        summary = profiler.runcall(facts, args.kubeconfig, args.page_size)
        profiler.dump_stats(args.profile)
    else:
        summary = facts(args.kubeconfig, args.page_size)
    summary["seconds"] = round(time.perf_counter() - started, 3)
    summary["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
