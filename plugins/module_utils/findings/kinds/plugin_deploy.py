# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kinds of the device-plugin deployment (gpu_device_plugin): why it refuses to apply, and what
a rollout left undone. Every refusal means nothing was written.

Every hit's ``where`` names the object (``subject``) and, where there is one, the node (``node``).
"""

from __future__ import annotations

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import CHECK_PLUGIN_DEPLOY, Kind
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.severity import ERROR, WARNING

CHECKS = (CHECK_PLUGIN_DEPLOY,)
NOTHING_APPLIED = "nothing was applied"

KINDS = (
    Kind(
        "deploy_config_invalid",
        ERROR,
        "Config the plugin would reject or ignore",
        "{path}: {problem}; " + NOTHING_APPLIED,
        "{remedy}",
        CHECKS,
    ),
    Kind(
        "deploy_not_owned",
        ERROR,
        "Object of the same name not made by this collection",
        "{subject} exists without the label {label}: it was not made by this collection and is left as it is; "
        + NOTHING_APPLIED,
        "deploy into another namespace (namespace), or remove {subject} if it is a leftover of an earlier "
        "manual install",
        CHECKS,
    ),
    Kind(
        "deploy_already_served",
        ERROR,
        "Nodes another device plugin already serves",
        "{count} node(s) the plugin would run on already run {deployment} ({pods}): a second device plugin "
        "would register the same GPUs with the kubelet; " + NOTHING_APPLIED,
        "remove the other deployment first, or narrow node_selector to nodes it does not serve ({nodes})",
        CHECKS,
    ),
    Kind(
        "deploy_no_target_nodes",
        WARNING,
        "No node to run on",
        "no node matches the plugin's placement ({placement}): the DaemonSet runs no pod",
        "label the GPU nodes to match node_selector, for example kubectl label node <node> {label}",
        CHECKS,
    ),
    Kind(
        "deploy_rollout_incomplete",
        ERROR,
        "Rollout not complete in time",
        "after {timeout}s, {count} targeted node(s) lack a Ready plugin pod of the current template or its GPU "
        "capacity: {waiting}",
        "{describe}; kubectl -n {namespace} get pods -o wide -l {selector}",
        CHECKS,
    ),
)
