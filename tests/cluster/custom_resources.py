"""Custom resource definitions and instances of ML workload kinds, applied after the fleet.

The files are in crds/ (see its README for their sources): definitions, then instances in
file-name order. Nothing runs the instances (no operator), so each stays a queued job: a pod
template the live audit must judge without any pod.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

FOLDER = Path(__file__).resolve().parent / "crds"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def load(folder: Path) -> list[dict[str, Any]]:
    return [yaml.safe_load(path.read_text()) for path in sorted(folder.glob("*.yaml"))]


def definitions() -> list[dict[str, Any]]:
    return load(FOLDER / "definitions")


def instances() -> list[dict[str, Any]]:
    return load(FOLDER / "instances")


def established(crd: dict[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def _established_at(get: Callable[[str], dict], path: str) -> Callable[[], bool]:
    return lambda: established(get(path))


def collection_path(obj: dict[str, Any], crds: list[dict[str, Any]]) -> str:
    """Where an instance is created: the core API for a Namespace, its definition's plural otherwise."""
    if obj["kind"] == "Namespace":
        return "/api/v1/namespaces"
    group, _slash, version = obj["apiVersion"].partition("/")
    [crd] = [c for c in crds if c["spec"]["group"] == group and c["spec"]["names"]["kind"] == obj["kind"]]
    return f"/apis/{group}/{version}/namespaces/{obj['metadata']['namespace']}/{crd['spec']['names']['plural']}"


def apply(
    ensure: Callable[[str, dict], None], get: Callable[[str], dict], wait: Callable[[str, Callable[[], bool]], None]
) -> None:
    """Create the definitions, wait until each is served, then create the instances."""
    crds = definitions()
    for crd in crds:
        ensure(CRD_PATH, crd)
    for crd in crds:
        path = f"{CRD_PATH}/{crd['metadata']['name']}"
        wait(f"CustomResourceDefinition {crd['metadata']['name']} established", _established_at(get, path))
    for obj in instances():
        ensure(collection_path(obj, crds), obj)
