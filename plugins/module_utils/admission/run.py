# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One run of gpu_admission_policy on the write-module skeleton: the objects generated from the
options, then rendered to files for GitOps (`rendered`: no client, no cluster needed), applied, or
removed (`run`)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.kubegpu.scheduling.plugins.module_utils.admission import policy, reads, reconcile
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.module import WriteRun
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.owned import object_key


def settings_of(params: Mapping[str, Any]) -> policy.AdmissionSettings:
    exempt = params["exempt_namespaces"]
    return policy.AdmissionSettings(
        enforcement=params["enforcement"],
        warnings_enforcement=params["warnings_enforcement"],
        exempt_namespaces=tuple(exempt) if exempt is not None else policy.default_exempt_namespaces(),
        extra_exempt_namespaces=tuple(params["extra_exempt_namespaces"]),
        mutating=params["mutating"],
    )


def _same_text(path: str, text: str) -> bool:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read() == text
    except FileNotFoundError:
        return False


def render(objects: Sequence[Mapping[str, Any]], directory: str, check_mode: bool) -> WriteRun:
    """One YAML file per object in `directory`, written only where its text changes."""
    import yaml  # pylint: disable=import-outside-toplevel

    files, changes = [], []
    for obj in objects:
        path = os.path.join(directory, f"{obj['kind'].lower()}-{obj['metadata']['name']}.yaml")
        text = yaml.safe_dump(dict(obj), sort_keys=False, width=1000)
        files.append(path)
        if _same_text(path, text):
            continue
        changes.append(object_key(obj))
        if not check_mode:
            os.makedirs(directory, exist_ok=True)
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text)
    return WriteRun({"changes": changes, "files": files}, bool(changes))


def stale_objects(
    client: KubeClient, settings: policy.AdmissionSettings, objects: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The objects a run with the mutating policy made that this run does not, bindings first."""
    kept = {object_key(o) for o in objects}
    everything = policy.admission_objects(replace(settings, mutating=True))
    stale = [o for o in everything if object_key(o) not in kept]
    if stale and not settings.mutating:
        # The mutating API may not be served; then nothing of it can be left to remove.
        try:
            reads.require_apis(client, True)
        except ClusterError:
            return []
    return list(reversed(stale))


def with_base(done: WriteRun, base: Mapping[str, Any]) -> WriteRun:
    return replace(done, result={**base, **done.result})


def base_of(settings: policy.AdmissionSettings, objects: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {"objects": [object_key(o) for o in objects], "exempt_namespaces": list(settings.exempt_namespaces)}


def rendered(module: AnsibleModule) -> WriteRun | None:
    """With render_to and state=present, the objects rendered to files, without a client; else None."""
    params = module.params
    if not (params["render_to"] and params["state"] == "present"):
        return None
    settings = settings_of(params)
    objects = policy.admission_objects(settings)
    return with_base(render(objects, params["render_to"], module.check_mode), base_of(settings, objects))


def run(module: AnsibleModule, client: KubeClient) -> WriteRun:
    params = module.params
    settings = settings_of(params)
    if params["state"] == "absent":
        everything = policy.admission_objects(replace(settings, mutating=True))
        return with_base(reconcile.absent(client, everything, module.check_mode), base_of(settings, everything))
    objects = policy.admission_objects(settings)
    reads.require_apis(client, settings.mutating)
    stale = stale_objects(client, settings, objects)
    return with_base(reconcile.present(client, objects, stale, module.check_mode), base_of(settings, objects))
