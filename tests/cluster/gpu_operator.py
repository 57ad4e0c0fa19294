"""The GPU Operator's operands in the local fleet, as the operator deploys them.

Each operand is the DaemonSet of the operator's `assets/state-*` with the operator's default images,
the same file the validator's unit tests read (tests/unit/fixtures/manifests/system/
gpu-operator-<operand>.yaml, which names its source), put in the operator's namespace with the
service account it names. Its node selector is the operator's own, `nvidia.com/gpu.deploy.<operand>:
"true"`, so the fleet picks the nodes an operand runs on by labelling them; KWOK runs the pods.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

SYSTEM_FIXTURES = Path(__file__).resolve().parents[1] / "unit" / "fixtures" / "manifests" / "system"
DEPLOY_LABEL = "nvidia.com/gpu.deploy.{operand}"


def known_operands() -> list[str]:
    return sorted(p.stem.removeprefix("gpu-operator-") for p in SYSTEM_FIXTURES.glob("gpu-operator-*.yaml"))


def parse(raw: Any, where: str, fail: Callable[[str, str], Exception]) -> dict | None:
    """The `gpu_operator` section: {namespace, operands}; None when the fleet has none."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) - {"namespace", "operands"}:
        raise fail(where, "expected a mapping with namespace and operands")
    namespace, operands = raw.get("namespace"), raw.get("operands")
    if not isinstance(namespace, str) or not namespace:
        raise fail(f"{where}.namespace", "expected a namespace name")
    known = known_operands()
    if not isinstance(operands, list) or not operands or any(o not in known for o in operands):
        raise fail(f"{where}.operands", f"expected a list of operands out of {', '.join(known)}")
    return {"namespace": namespace, "operands": list(operands)}


def operand_daemonset(namespace: str, operand: str) -> dict:
    daemonset = yaml.safe_load((SYSTEM_FIXTURES / f"gpu-operator-{operand}.yaml").read_text(encoding="utf-8"))
    daemonset["metadata"]["namespace"] = namespace
    return daemonset


def objects(spec: dict | None) -> list[tuple[str, dict]]:
    """(collection path, object) to create, in order: the namespace, service accounts, DaemonSets."""
    if not spec:
        return []
    namespace = spec["namespace"]
    daemonsets = [operand_daemonset(namespace, operand) for operand in spec["operands"]]
    accounts = sorted({d["spec"]["template"]["spec"].get("serviceAccountName") for d in daemonsets} - {None})
    found: list[tuple[str, dict]] = [
        ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    ]
    found += [
        (
            f"/api/v1/namespaces/{namespace}/serviceaccounts",
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}},
        )
        for name in accounts
    ]
    found += [(f"/apis/apps/v1/namespaces/{namespace}/daemonsets", d) for d in daemonsets]
    return found


def daemonsets(spec: dict | None) -> list[dict]:
    """{namespace, name} of each operand DaemonSet, for the wait until the fleet is settled."""
    if not spec:
        return []
    return [
        {"namespace": spec["namespace"], "name": operand_daemonset(spec["namespace"], o)["metadata"]["name"]}
        for o in spec["operands"]
    ]
