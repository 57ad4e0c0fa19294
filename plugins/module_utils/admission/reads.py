# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the admission module reads and writes: the served admission APIs, each object as it is,
a dry-run server-side apply to tell whether it would change, the apply itself and the deletion."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.admission.plan import (
    RESOURCES,
    enforcement_status,
    enforcement_unknown,
    missing_apis,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.admission.policy import (
    API_VERSION,
    VALIDATING_POLICY_NAMES,
    object_key,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError, error_context
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.paths import api_path

FIELD_MANAGER = "kubegpu-admission-policy"


def object_path(obj: dict[str, Any]) -> str:
    return api_path(API_VERSION, RESOURCES[obj["kind"]], obj["metadata"]["name"])


def require_apis(client: KubeClient, mutating: bool) -> None:
    """A clear error when the cluster does not serve the admission policy APIs."""
    try:
        # The group version's discovery document, not a resource: no api_path.
        served = [str(r.get("name")) for r in client.get(f"/apis/{API_VERSION}").get("resources") or []]
    except ClusterError as exc:
        if exc.status != 404:
            raise ClusterError(f"cannot read the admission APIs: {exc.message}", exc.status) from None
        served = []
    missing = missing_apis(served, mutating)
    if missing:
        raise ClusterError(
            f"the cluster does not serve {', '.join(missing)} in {API_VERSION}: ValidatingAdmissionPolicy needs "
            "Kubernetes 1.30 or later, MutatingAdmissionPolicy 1.36 or later"
        )


def read_object(client: KubeClient, obj: dict[str, Any]) -> dict[str, Any] | None:
    with error_context(f"cannot read {object_key(obj)}"):
        return client.find(object_path(obj))


def apply_object(client: KubeClient, obj: dict[str, Any], *, dry_run: bool) -> dict[str, Any]:
    with error_context(f"cannot apply {object_key(obj)}"):
        return client.apply(object_path(obj), obj, FIELD_MANAGER, dry_run=dry_run)


def delete_object(client: KubeClient, obj: dict[str, Any]) -> bool:
    """Delete; False when it was not there."""
    with error_context(f"cannot delete {object_key(obj)}"):
        return client.delete(object_path(obj)) is not None


def wait_type_checked(
    client: KubeClient, policy: dict[str, Any], ready: Callable[[dict[str, Any]], bool], timeout: float = 10
) -> dict[str, Any] | None:
    """The policy once the API server has type-checked it (or as it is when the time is up)."""
    deadline = time.monotonic() + timeout
    while True:
        live = read_object(client, policy)
        if live is None or ready(live) or time.monotonic() > deadline:
            return live
        time.sleep(0.5)


def read_enforcement(client: KubeClient) -> dict[str, Any]:
    """Which of the collection's validating policies are in force on the cluster (admission/plan.py
    judges); "unknown" with the reason where the API is not served or may not be read."""
    try:
        require_apis(client, mutating=False)
        live = {}
        for policy in VALIDATING_POLICY_NAMES:
            stub = {"kind": "ValidatingAdmissionPolicy", "metadata": {"name": policy}}
            stub_binding = {"kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": policy}}
            live[policy] = (read_object(client, stub), read_object(client, stub_binding))
    except ClusterError as exc:
        return enforcement_unknown(exc.message)
    return enforcement_status(live)
