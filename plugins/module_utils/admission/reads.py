# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the admission module reads: the served admission APIs, a policy until the API server has
type-checked it, and which of the collection's policies are in force. Its objects are read and
written as write/owned.py reads and writes the collection's objects, under OWNER."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
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
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.owned import Owner, read

OWNER = Owner("kubegpu-admission-policy", RESOURCES)


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


def wait_type_checked(
    client: KubeClient, policy: Mapping[str, Any], ready: Callable[[dict[str, Any]], bool], timeout: float = 10
) -> dict[str, Any] | None:
    """The policy once the API server has type-checked it (or as it is when the time is up)."""
    deadline = time.monotonic() + timeout
    while True:
        live = read(client, OWNER, policy)
        if live is None or ready(live) or time.monotonic() > deadline:
            return live
        time.sleep(0.5)


def stub(kind: str, name: str) -> dict[str, Any]:
    """Enough of an admission object to read it by."""
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": name}}


def read_enforcement(client: KubeClient) -> dict[str, Any]:
    """Which of the collection's validating policies are in force on the cluster (admission/plan.py
    judges); "unknown" with the reason where the API is not served or may not be read."""
    try:
        require_apis(client, mutating=False)
        live = {}
        for policy in VALIDATING_POLICY_NAMES:
            stubs = [stub(kind, policy) for kind in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")]
            live[policy] = (read(client, OWNER, stubs[0]), read(client, OWNER, stubs[1]))
    except ClusterError as exc:
        return enforcement_unknown(exc.message)
    return enforcement_status(live)
