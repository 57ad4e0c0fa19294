# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One run of gpu_device_plugin on the write-module skeleton: the options read, the config checked
offline before any request, then the deployment brought to the cluster or removed. The module hands
in what other checks do (the config check of plugin_config/, the plugin pods the device-plugin check
finds), since a feature folder does not import another."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import Hit
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import CheckFailed, OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_deploy import reconcile
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_deploy.manifests import build_deploy_options
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.module import WriteRun

try:
    import yaml

    HAS_YAML = True
except ImportError:  # pragma: no cover - PyYAML is a requirement; the module says so when it is missing
    HAS_YAML = False

CONFIG_NAME = "config"
# The options build_deploy_options takes as the module names them.
DEPLOY_OPTIONS = ("version", "namespace", "node_selector", "dra_node_label", "priority_class", "max_unavailable")


@dataclass(frozen=True)
class Checks:
    """What the module hands in from other checks: the config check's verdict of a config text for a
    release (plugin_config/), and the device-plugin pods on the cluster (device_plugin/)."""

    config_verdict: Callable[[str, str], Mapping[str, Any]]
    plugin_pods: Callable[[KubeClient], list[dict[str, Any]]]


def config_text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict):
        return yaml.safe_dump(value, sort_keys=False)
    raise OptionError(f"config must be the config file's text or a dictionary, not {type(value).__name__}")


def checked_config(verdict: Mapping[str, Any]) -> dict[str, Any] | None:
    """What the plugin advertises with the config; a CheckFailed, before any request, when it has an error."""
    if verdict["valid"]:
        return verdict["configs"].get(CONFIG_NAME)
    hits = [
        Hit("deploy_config_invalid", f, {"subject": CONFIG_NAME})
        for f in verdict["findings"]
        if f["severity"] == "error"
    ]
    findings = reconcile.findings_of(hits)
    raise CheckFailed(
        "config refused, nothing applied: " + "; ".join(f["problem"] for f in findings[:5]),
        result={"changed": False, "findings": findings, "config_findings": verdict["findings"]},
    )


def deploy(module: AnsibleModule, client: KubeClient, checks: Checks) -> WriteRun:
    params = module.params
    if params["state"] == "absent":
        return reconcile.absent(
            client, build_deploy_options(namespace=params["namespace"]).namespace, module.check_mode
        )
    if not HAS_YAML:
        raise OptionError(missing_required_lib("PyYAML"))
    text = config_text(params["config"])
    summary = checked_config(checks.config_verdict(text, params["version"])) if text is not None else None
    options = build_deploy_options(
        **{k: params[k] for k in DEPLOY_OPTIONS}, config=text, feature_discovery=params["feature_discovery"]
    )
    done = reconcile.present(
        client,
        options,
        summary,
        lambda: checks.plugin_pods(client),
        module.check_mode,
        params["wait_timeout"] if params["wait"] else None,
    )
    if summary is not None:
        return WriteRun({**done.result, "config": summary}, done.changed, done.diff, done.warnings, done.failure)
    return done


def runner(checks: Checks) -> Callable[[AnsibleModule, KubeClient], WriteRun]:
    """The run the module hands to run_write_module."""
    return lambda module, client: deploy(module, client, checks)
