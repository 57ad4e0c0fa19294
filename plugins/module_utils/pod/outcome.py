# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What became of the pod once it exists: waited for until it runs or completes, where it landed
(node and GPU model), and the tail of its log; a pod that does not settle in time or fails fails
the task, with the result so far."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import CheckFailed, ClusterError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.pod import lifecycle


@dataclass(frozen=True)
class Watch:
    """How the task follows the pod: whether it waits and for how long, whether it reads the log and
    how many lines, and the label keys that name the node's GPU model."""

    wait: bool = True
    timeout: float = 120
    logs: bool = True
    log_lines: int = 100
    model_label_keys: Any = None


def settled_pod(client: KubeClient, namespace: str, name: str, watch: Watch, result: dict) -> dict:
    """The pod as read, once it runs or completes when the task waits; it not settling in time fails."""
    pod = lifecycle.read_pod(client, namespace, name) or {}
    if not watch.wait:
        return pod
    pod, settled = lifecycle.wait_for(
        lambda: lifecycle.read_pod(client, namespace, name) or {},
        lambda p: lifecycle.is_settled(lifecycle.pod_summary(p)),
        watch.timeout,
    )
    if not settled:
        summary = lifecycle.pod_summary(pod)
        raise CheckFailed(lifecycle.timeout_message(name, namespace, summary, watch.timeout), result=result)
    return pod


def log_tail(client: KubeClient, namespace: str, name: str, lines: int, warn: Callable[[str], None]) -> list[str]:
    """The last lines of the pod's log; none, with a warning, when its node cannot serve them."""
    try:
        text = client.read_text(lifecycle.pod_path(namespace, name, "log"), query={"tailLines": lines})
    except ClusterError as exc:
        if exc.status in (401, 403):
            raise
        # The pod runs; logs its node cannot serve are worth a warning, not a failed task.
        warn(f"could not read the logs of pod {namespace}/{name}: {exc.message}")
        text = ""
    return text.splitlines()


def follow(client: KubeClient, definition: dict, watch: Watch, result: dict, warn: Callable[[str], None]) -> dict:
    """The result with the pod's phase, node, model and log; a pod that failed fails the task."""
    namespace, name = definition["metadata"]["namespace"], definition["metadata"]["name"]
    summary = lifecycle.pod_summary(settled_pod(client, namespace, name, watch, result))
    result.update(phase=summary["phase"])
    result.update(lifecycle.landed_on(client, summary["node"], watch.model_label_keys))
    if watch.logs and lifecycle.is_settled(summary):
        result["logs"] = log_tail(client, namespace, name, watch.log_lines, warn)
    if summary["phase"] == "Failed":
        raise CheckFailed(f"pod {namespace}/{name} failed on node {summary['node']}", result=result)
    return result
