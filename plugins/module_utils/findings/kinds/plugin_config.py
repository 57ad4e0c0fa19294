# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kinds of the device-plugin config check: what NVIDIA's device plugin rejects in its config
file (it exits, so its pod crash-loops on every GPU node) or ignores (it starts, and the capacity is
not what the config says), from the ``version: v1`` schema of the pinned releases
(NVIDIA/k8s-device-plugin api/config/v1 and cmd/nvidia-device-plugin/main.go validateFlags).

Every hit's ``where`` names the config (``config``) and the key's path (``path``).
"""

from __future__ import annotations

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import CHECK_PLUGIN_CONFIG, Kind
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.severity import ERROR, INFO, WARNING

CHECKS = (CHECK_PLUGIN_CONFIG,)
EXITS = "the plugin exits at start ({error}), so its pod crash-loops on every node that reads this config"

KINDS = (
    Kind(
        "config_unparsable",
        ERROR,
        "Config file the plugin cannot parse",
        "{path}: {problem}; " + EXITS.format(error="unable to parse config file"),
        "write the config as one YAML mapping with version: v1 at the top",
        CHECKS,
    ),
    Kind(
        "config_unknown_version",
        ERROR,
        "Unknown config version",
        "version is {value!r}; " + EXITS.format(error="unknown version"),
        "set version: v1 (the only version {release} reads)",
        CHECKS,
    ),
    Kind(
        "config_unknown_key",
        ERROR,
        "Key the plugin ignores",
        "{path} is not a key of the {release} config: the plugin ignores it without a word",
        "remove it, or use one of the keys of {parent}: {known}",
        CHECKS,
    ),
    Kind(
        "config_misplaced_key",
        ERROR,
        "Key in the wrong place, ignored",
        "{path} is not read there: the plugin ignores it, and {key} keeps its default",
        "move it to {right}",
        CHECKS,
    ),
    Kind(
        "config_key_not_in_release",
        ERROR,
        "Key of a later release",
        "{path} is read from {since} on; the plugin {release} ignores it",
        "deploy {since} or later, or remove the key",
        CHECKS,
    ),
    Kind(
        "config_key_case",
        WARNING,
        "Key with the wrong case",
        "{path} is read as {right} only because Go's JSON decoder ignores case in struct fields",
        "spell it {right}",
        CHECKS,
    ),
    Kind(
        "config_wrong_type",
        ERROR,
        "Value of the wrong type",
        "{path} is {found}, not {expected}; " + EXITS.format(error="unmarshal error"),
        "write {path} as {expected}{example}",
        CHECKS,
    ),
    Kind(
        "config_invalid_choice",
        ERROR,
        "Value the plugin does not know",
        "{path} is {value!r}; " + EXITS.format(error="{error}"),
        "use one of {choices}",
        CHECKS,
    ),
    Kind(
        "config_missing_field",
        ERROR,
        "Required field missing",
        "{path} has no {field}; " + EXITS.format(error="{error}"),
        "{remedy}",
        CHECKS,
    ),
    Kind(
        "config_replicas_below_two",
        ERROR,
        "Fewer than two replicas",
        "{path} is {value}; " + EXITS.format(error="number of replicas must be >= 2"),
        "set replicas to 2 or more, or remove the {strategy} section to give each container a whole GPU",
        CHECKS,
    ),
    Kind(
        "config_invalid_resource_name",
        ERROR,
        "Resource name Kubernetes would not take",
        "{path} is {value!r}: {problem}; " + EXITS.format(error="incorrect format for resource name"),
        "use nvidia.com/<name>, at most 63 characters, the name a DNS subdomain (for example nvidia.com/gpu)",
        CHECKS,
    ),
    Kind(
        "config_invalid_devices",
        ERROR,
        "Devices the plugin cannot read",
        "{path} is {value!r}: {problem}; " + EXITS.format(error="unrecognized devices spec"),
        'set devices to "all" (the only value {release} honours), or leave it out',
        CHECKS,
    ),
    Kind(
        "config_rename_ignored",
        ERROR,
        "Rename the plugin ignores",
        "{path} is {value!r}, but {release} does not honour rename: the resource is advertised as {advertised}",
        "remove rename; set renameByDefault: true in sharing.{strategy} to advertise {shared} instead",
        CHECKS,
    ),
    Kind(
        "config_devices_ignored",
        ERROR,
        "Device selection the plugin ignores",
        "{path} is {value!r}, but {release} shares all devices: every GPU of the node is replicated",
        "remove devices (all GPUs are shared), or give the GPUs to share a node pool of their own",
        CHECKS,
    ),
    Kind(
        "config_resources_ignored",
        ERROR,
        "Resource renaming the plugin ignores",
        "{path} is set, but {release} ignores the resources section: GPUs stay nvidia.com/gpu (MIG: nvidia.com/mig-*)",
        "remove the resources section",
        CHECKS,
    ),
    Kind(
        "config_sharing_both",
        ERROR,
        "Time-slicing and MPS both set",
        "sharing has both timeSlicing and mps: the plugin uses mps and ignores timeSlicing",
        "keep one of sharing.timeSlicing and sharing.mps (they are mutually exclusive)",
        CHECKS,
    ),
    Kind(
        "config_mps_without_root",
        ERROR,
        "MPS without an MPS root",
        "sharing.mps replicates GPUs but the plugin gets no MPS root ({deployment}); "
        + EXITS.format(error="using MPS requires --mps-root to be specified"),
        "deploy MPS with the plugin's Helm chart (mps.root, /run/nvidia/mps by default) or the GPU Operator, "
        "which set the root and run the MPS control daemon, or set flags.mpsRoot",
        CHECKS,
    ),
    Kind(
        "config_mps_mig_mixed",
        ERROR,
        "MPS with the mixed MIG strategy",
        "sharing.mps with flags.migStrategy mixed; "
        + EXITS.format(error="--mig-strategy=mixed is not supported with MPS"),
        "use migStrategy none or single with MPS, or share MIG devices by time-slicing",
        CHECKS,
    ),
    Kind(
        "config_mps_fail_requests_ignored",
        ERROR,
        "failRequestsGreaterThanOne false under MPS, ignored",
        "{path} is false, but the plugin {release} forces it to true under MPS: a container that asks for more "
        "than one {resource} is refused",
        "remove the key; to give a container more than one GPU, run it on a node without MPS sharing",
        CHECKS,
    ),
    Kind(
        "config_mps_one_replica_per_container",
        INFO,
        "One MPS replica per container",
        "under MPS a container gets at most one {resource} (the plugin refuses larger requests: maximum request "
        "size for shared resources is 1); a replica is 1/{replicas} of a GPU's memory and compute",
        "ask for 1 {resource} per CUDA client; for whole GPUs use nodes without MPS",
        CHECKS,
    ),
    Kind(
        "config_imex_channels",
        ERROR,
        "IMEX channel IDs the plugin refuses",
        "{path} is {value!r}; " + EXITS.format(error="channelIDs must be [] or [0]"),
        "set imex.channelIDs to [] or [0]",
        CHECKS,
    ),
    Kind(
        "config_default_missing",
        ERROR,
        "Default config not among the configs",
        "the default config {default!r} is not among the configs ({names}): the plugin finds no config to read "
        "and starts without sharing, so capacity stays one per GPU",
        "make the default a key of the ConfigMap that holds the configs; in the Helm chart config.name names that "
        "ConfigMap and config.default one of its keys",
        CHECKS,
    ),
    Kind(
        "config_mps_not_deployable",
        ERROR,
        "MPS with the static DaemonSet",
        "sharing.mps needs NVIDIA's MPS control daemon on every node, which the static DaemonSet of {release} "
        "does not run: the plugin waits for it and advertises nothing",
        "share by time-slicing with this deployment, or deploy MPS with the plugin's Helm chart",
        CHECKS,
    ),
    Kind(
        "config_mps_replicas_over_limit",
        ERROR,
        "More MPS replicas than MPS clients per GPU",
        "{path} is {value}, above the {most} clients an MPS server takes per GPU: the MPS control daemon exits "
        "(invalid MPS configuration: maximum allowed replicas exceeded: {value} > {most}), and the plugin, which "
        "waits for it, advertises nothing",
        "set replicas to {most} or fewer ({fewer} or fewer for GPUs below compute capability 7.5)",
        CHECKS,
    ),
    Kind(
        "config_mps_replicas_over_pre_volta_limit",
        WARNING,
        "More MPS replicas than older GPUs take",
        "{path} is {value}, above the {fewer} clients an MPS server takes per GPU below compute capability 7.5 "
        "(V100, P100 and older): on such nodes the MPS control daemon exits and the plugin advertises nothing",
        "set replicas to {fewer} or fewer where the config reaches GPUs below compute capability 7.5",
        CHECKS,
    ),
    Kind(
        "config_shared_resource_not_advertised",
        ERROR,
        "Shared resource no device has",
        "{path} is {value!r}, but under migStrategy {mig} the plugin advertises {exists}: it skips the entry, "
        "and nothing is shared",
        "{fix}",
        CHECKS,
    ),
    Kind(
        "config_chart_no_default",
        ERROR,
        "Helm values without a default config",
        "config.map has {count} configs ({names}) and no config.default, and the fallback strategies "
        "({fallbacks}) infer none: the chart refuses to render (A default config must be provided when more "
        "than one configuration is set in 'config.map')",
        "set config.default to one of {names}, name one entry default, or add single or empty to "
        "config.fallbackStrategies",
        CHECKS,
    ),
    Kind(
        "config_chart_name_and_map",
        ERROR,
        "Helm values with both config.name and config.map",
        "config.name ({name!r}) and config.map are both set: the chart refuses to render (Only one of "
        "'config.name' or 'config.map' should ever be set for a given deployment)",
        "keep config.map to have the chart build the ConfigMap, or config.name to point at one you create",
        CHECKS,
    ),
)
