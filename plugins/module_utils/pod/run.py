# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One run of gpu_pod on the write-module skeleton: the Pod created unless an identical one exists
(recreated on request), followed until it runs, or deleted."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import CheckFailed, OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.pod import lifecycle, outcome
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.diff import diff_entry
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.module import WriteRun


def definition_of(value: Any) -> Any:
    """The definition option as given: one Pod as a mapping, or as a YAML string; anything else, or a
    string that is not one YAML document, is an OptionError naming the option."""
    if value is None or isinstance(value, dict):
        return value
    if not isinstance(value, str):
        raise lifecycle.PodDefinitionError(
            f"definition must be one Pod, as a mapping or a YAML string, not {type(value).__name__}"
        )
    import yaml  # pylint: disable=import-outside-toplevel

    try:
        parsed = yaml.safe_load(value)
    except yaml.YAMLError as exc:
        raise lifecycle.PodDefinitionError(f"definition is not one YAML document (one Pod): {exc}") from None
    if not isinstance(parsed, dict):
        raise lifecycle.PodDefinitionError(f"definition must be one Pod; the YAML string holds {type(parsed).__name__}")
    return parsed


def remove(module: AnsibleModule, client: KubeClient, definition: Mapping[str, Any]) -> WriteRun:
    params = module.params
    metadata = definition.get("metadata") or {}
    name = params["name"] or metadata.get("name")
    if not name:
        raise OptionError("state=absent needs name or definition.metadata.name")
    namespace = params["namespace"] or metadata.get("namespace") or "default"
    existing = lifecycle.read_pod(client, namespace, name)
    if existing is None:
        return WriteRun({"action": "absent"}, False)
    if not module.check_mode:
        if params["wait"]:
            lifecycle.delete_and_wait(client, namespace, name, params["wait_timeout"])
        else:
            client.delete(lifecycle.pod_path(namespace, name))
    header = f"pod {namespace}/{name}"
    digest = lifecycle.digest_of(existing)
    return WriteRun({"action": "delete"}, True, diff_entry(header, {"manifest-sha256": digest}, {}))


def diff_of(existing: Mapping[str, Any] | None, definition: Mapping[str, Any]) -> dict[str, Any]:
    """Before: the digest of the manifest the existing pod was created from; after: the manifest."""
    namespace, name = definition["metadata"]["namespace"], definition["metadata"]["name"]
    before = {"manifest-sha256": lifecycle.digest_of(existing)} if existing else {}
    return diff_entry(f"pod {namespace}/{name}", before, definition)


def apply(module: AnsibleModule, client: KubeClient, given: Any) -> WriteRun:
    params = module.params
    definition = lifecycle.checked_definition(given, params["namespace"])
    name, namespace = definition["metadata"]["name"], definition["metadata"]["namespace"]
    digest = lifecycle.manifest_digest(definition)
    existing = lifecycle.read_pod(client, namespace, name)
    action = lifecycle.plan_present(existing, digest, params["recreate"])
    if action == "conflict":
        raise CheckFailed(
            f"pod {namespace}/{name} exists with a different manifest and a pod's spec cannot be changed; "
            "set recreate=true to delete and create it again",
            result={"action": action},
        )
    changed = action != "unchanged"
    diff = diff_of(existing, definition) if changed else None
    if module.check_mode:
        return WriteRun({"action": action}, changed, diff)
    if params["create_namespace"] and action == "create":
        lifecycle.ensure_namespace(client, namespace)
    if action == "recreate":
        lifecycle.delete_and_wait(client, namespace, name, params["wait_timeout"])
    if action in ("create", "recreate"):
        lifecycle.create_pod(client, namespace, lifecycle.with_digest(definition, digest), params["wait_timeout"])
    watch = outcome.Watch(
        params["wait"], params["wait_timeout"], params["logs"], params["log_lines"], params["model_label_keys"]
    )
    result = outcome.follow(client, definition, watch, {"changed": changed, "action": action}, module.warn)
    return WriteRun({k: v for k, v in result.items() if k != "changed"}, changed, diff)


def run(module: AnsibleModule, client: KubeClient) -> WriteRun:
    definition = definition_of(module.params["definition"])
    if module.params["state"] == "present":
        return apply(module, client, definition)
    return remove(module, client, definition or {})
