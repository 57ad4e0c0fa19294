# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Would the GPU pods of these manifests fit now, and where: each pod template (of any workload kind
the pod-spec walker knows) with its replicas, against the fleet as it is. Each object is weighed on
its own against the free resources of now, not after the others."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import Hit
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import request_counts
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import as_mapping, optional_int
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.workloads import PodSpecSite, walk_document
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.fleet import Fleet
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.pending import (
    CLAIMED,
    explain,
    explain_rest,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.projection import pod_shape, wants_gpus

CLAIM_TEMPLATE_KINDS = ("ResourceClaimTemplate", "ResourceClaim")
FITS_NOW = "placement.fits_now"
FITS_PARTLY = "placement.fits_partly"
MAX_NODES_SHOWN = 20


def replicas_of(obj: Mapping[str, Any]) -> int:
    """How many pods of its template an object asks for at once: replicas, or a Job's parallelism."""
    spec = as_mapping(obj.get("spec"))
    for key in ("replicas", "parallelism"):
        value = optional_int(spec.get(key))
        if value is not None:
            return max(value, 0)
    return 1


def claim_templates(documents: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """The device requests of the ResourceClaimTemplates and ResourceClaims among the manifests."""
    found = {}
    for obj in documents:
        if obj.get("kind") not in CLAIM_TEMPLATE_KINDS:
            continue
        metadata, spec = as_mapping(obj.get("metadata")), as_mapping(obj.get("spec"))
        claim_spec = as_mapping(spec.get("spec")) if obj.get("kind") == "ResourceClaimTemplate" else spec
        found[(str(metadata.get("namespace") or "default"), str(metadata.get("name")))] = request_counts(claim_spec)
    return found


def site_shape(
    site: PodSpecSite, templates: Mapping[tuple[str, str], list[dict[str, Any]]], is_gpu: Callable[[str], bool]
) -> dict[str, Any]:
    shape = pod_shape(site.spec, {}, is_gpu)
    namespace = site.ref.namespace or "default"
    requests = []
    for claim in (as_mapping(c) for c in site.spec.get("resourceClaims") or []):
        template = claim.get("resourceClaimTemplateName")
        if isinstance(template, str) and (namespace, template) in templates:
            requests += templates[(namespace, template)]
            shape["claims_not_made"] = False
    shape["claim_requests"] = requests
    return shape


def what_if(
    documents: Iterable[Any], fleet: Fleet, is_gpu: Callable[[str], bool]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Per GPU pod template of the documents (each with `data`, `source`, `index`): whether its replicas
    fit now and where; and what could not be read."""
    loaded = list(documents)
    templates = claim_templates(as_mapping(d.data) for d in loaded)
    results, skipped = [], []
    explained: dict[str, dict[str, Any]] = {}  # identical pod shapes get one answer
    for document in loaded:
        sites, not_checked = walk_document(document.data, source=document.source, document=document.index)
        skipped += [n.to_dict() for n in not_checked]
        for site in sites:
            shape = site_shape(site, templates, is_gpu)
            if not wants_gpus(shape, is_gpu) and not shape["claim_requests"]:
                continue
            key = json.dumps(shape, sort_keys=True, default=str)
            if key not in explained:
                explained[key] = explain(shape, fleet, is_gpu, {})
            entry = explained[key]
            replicas = replicas_of(as_mapping(document.data)) if not site.prefix else 1
            if 0 < entry["pods_that_fit"] < replicas:
                if "rest" not in entry:
                    entry["rest"] = explain_rest(shape, fleet, entry["fits_on"])
                entry = partial_fit(entry, replicas)
            results.append(_site_result(site, entry, replicas))
    return results, skipped


def partial_fit(explained: Mapping[str, Any], replicas: int) -> dict[str, Any]:
    """A shape of which only some of `replicas` pods fit: the words and the sum are those of the pods that
    stay Pending (`explained["rest"]`, what their FailedScheduling event says), and the sentence says how
    many of how many fit, where, and why the rest do not."""
    fit, rest = explained["pods_that_fit"], explained["rest"]
    ranked = sorted(explained["fits_on"].items(), key=lambda pair: (-pair[1], pair[0]))
    nodes = ", ".join(f"{node} ({count})" for node, count in ranked[:MAX_NODES_SHOWN])
    more = f" and {len(ranked) - MAX_NODES_SHOWN} more node(s)" if len(ranked) > MAX_NODES_SHOWN else ""
    fields = {
        "fit": fit,
        "replicas": replicas,
        "pending": replicas - fit,
        "nodes": nodes + more,
        "message": rest["message"],
        "gpus": explained["gpus"],
        "resource": explained["resource"] or CLAIMED,
    }
    notes = [h for h in explained["hits"] if h.kind != FITS_NOW]
    return {**explained, **rest, "hits": [Hit(FITS_PARTLY, fields), *notes]}


def _site_result(site: PodSpecSite, explained: Mapping[str, Any], replicas: int) -> dict[str, Any]:
    ref = site.ref
    obj = f"{ref.kind} {ref.namespace or 'default'}/{ref.name}"
    where = {"object": obj, "path": site.path}
    ranked = sorted(explained["fits_on"].items(), key=lambda pair: (-pair[1], pair[0]))
    return {
        "object": obj,
        "source": ref.source,
        "document": ref.document,
        "path": site.path,
        "replicas": replicas,
        **{k: v for k, v in explained.items() if k not in ("fits_on", "hits", "rest")},
        "hits": [Hit(h.kind, h.fields, where) for h in explained["hits"]],
        "fits": explained["pods_that_fit"] >= max(replicas, 1),
        "fits_on": dict(ranked[:MAX_NODES_SHOWN]),
    }
