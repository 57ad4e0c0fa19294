# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_plugin_config_validate
short_description: Check NVIDIA device-plugin configs offline, before they reach a node
version_added: 1.0.0
description:
  - Checks config files of NVIDIA's device plugin (C(version) V(v1)) against the schema of a pinned
    release, without a cluster, and says for each mistake the key's path and the fix. The plugin reads
    its config only when it starts, so a mistake crash-loops it on every GPU node (a value of the wrong
    type, an unknown version or MIG strategy, fewer than two replicas, an empty C(sharing.timeSlicing),
    more MPS replicas than the MPS control daemon's 48 clients per GPU) or is silently ignored and the
    capacity is not GPUs x replicas (a key it does not know, C(renameByDefault) under C(flags) instead of
    C(sharing.timeSlicing), C(rename), C(devices) and the C(resources) section, which these releases
    ignore, a shared resource no device has, such as a MIG resource outside the C(mixed) MIG strategy or
    C(nvidia.com/gpu.shared)). Helm values the plugin's chart refuses to render (several configs and no
    default it can infer, C(config.name) with C(config.map)) are errors too.
  - The MPS root is a deployment setting (the Helm chart's C(mps.root), the GPU Operator's), not a field
    of the file; it is judged only where the deployment is seen (Helm values, O(static_daemonset)). The
    rules and the code of the plugin each follows are listed in the collection's docs/plugin-config.md.
  - Reads a config (O(config)), a set of named configs (O(configs), the entries of the plugin's ConfigMap), or files
    (O(src)) and inline documents (O(definition)) that hold one or more YAML documents, each a config, a ConfigMap of
    configs, the values of the plugin's Helm chart (C(config.map), C(config.default)) or those of the GPU Operator's
    (C(devicePlugin.config.data), C(devicePlugin.config.default)). Each file and each document is checked; the verdict
    covers them all.
  - Finding kinds (RV(findings[].kind)), errors unless said otherwise. V(config_unparsable),
    V(config_unknown_version), V(config_unknown_key), V(config_misplaced_key), V(config_key_not_in_release),
    V(config_key_case) (warning), V(config_wrong_type), V(config_invalid_choice), V(config_missing_field),
    V(config_replicas_below_two), V(config_invalid_resource_name), V(config_invalid_devices),
    V(config_rename_ignored), V(config_devices_ignored), V(config_resources_ignored), V(config_sharing_both),
    V(config_mps_without_root), V(config_mps_mig_mixed), V(config_mps_fail_requests_ignored),
    V(config_mps_one_replica_per_container) (info), V(config_imex_channels), V(config_default_missing),
    V(config_mps_not_deployable), V(config_mps_replicas_over_limit),
    V(config_mps_replicas_over_pre_volta_limit) (warning), V(config_shared_resource_not_advertised),
    V(config_chart_no_default), V(config_chart_name_and_map).
  - Fails when a finding is an error, or of the severity O(fail_on) names; with O(fail_on=never) it only reports.
    The same checks run from the command line as C(scripts/gpu-plugin-config-validate).
author:
  - kubegpu.scheduling contributors (@kubegpu)
extends_documentation_fragment:
  - kubegpu.scheduling.options.sources
  - kubegpu.scheduling.options.fail_on
  - kubegpu.scheduling.read_only
options:
  config:
    description:
      - One config, as the plugin reads it from its file (its text), or as a dictionary.
    type: raw
  configs:
    description:
      - Named configs, as the entries of the plugin's ConfigMap (name to config text, or to a dictionary).
    type: dict
  default_config:
    description:
      - The config the plugin reads by default; it must be one of the configs.
    type: str
  release:
    description:
      - The plugin release whose schema applies.
    type: str
    choices: [v0.17.4, v0.18.2]
    default: v0.18.2
  static_daemonset:
    description:
      - The configs are for NVIDIA's static DaemonSet (as M(kubegpu.scheduling.gpu_device_plugin) deploys it),
        which sets no MPS root and runs no MPS control daemon, so MPS sharing is an error.
    type: bool
    default: false
  report_only:
    description:
      - Never fail; return the verdict only. V(true) is the same as O(fail_on=never).
      - Deprecated, removed in version 2.0.0 of kubegpu.scheduling; use O(fail_on=never) instead.
    type: bool
requirements:
  - PyYAML
seealso:
  - name: NVIDIA device plugin, shared access to GPUs
    description: The time-slicing and MPS options the checks follow.
    link: https://github.com/NVIDIA/k8s-device-plugin#shared-access-to-gpus
"""

EXAMPLES = r"""
- name: Check a time-slicing config before it is rolled out
  kubegpu.scheduling.gpu_plugin_config_validate:
    config: |
      version: v1
      sharing:
        timeSlicing:
          renameByDefault: true
          resources:
            - name: nvidia.com/gpu
              replicas: 4

- name: Check the GPU Operator values of a release, and report only
  kubegpu.scheduling.gpu_plugin_config_validate:
    src: gpu-operator-values.yaml
    fail_on: never
  register: plugin_config

- name: Check every config file of a folder, and fail on warnings too
  kubegpu.scheduling.gpu_plugin_config_validate:
    src: [device-plugin/configs/]
    fail_on: warning
"""

RETURN = r"""
valid:
  description: Whether no finding is an error.
  returned: always
  type: bool
  sample: false
release:
  description: The release whose schema was applied.
  returned: always
  type: str
  sample: v0.18.2
configs:
  description: >-
    What each config makes the plugin advertise: the sharing C(strategy) (V(none), V(time-slicing) or V(mps)),
    the C(mig_strategy), and the C(shared) resources with their C(name), the C(advertised) name and C(replicas).
  returned: always
  type: dict
  sample:
    any:
      release: v0.18.2
      strategy: time-slicing
      mig_strategy: none
      shared: [{name: nvidia.com/gpu, advertised: nvidia.com/gpu.shared, replicas: 4}]
findings:
  description: Every mistake, errors first.
  returned: always
  type: list
  elements: dict
  sample:
    - id: plugin_config.config_misplaced_key
      severity: error
      title: Key in the wrong place, ignored
      message: 'flags.renameByDefault is not read there: the plugin ignores it, and renameByDefault keeps its default'
      remedy: move it to sharing.timeSlicing.renameByDefault
      where:
        config: any
        path: flags.renameByDefault
      kind: config_misplaced_key
      config: any
      path: flags.renameByDefault
      problem: 'flags.renameByDefault is not read there: the plugin ignores it, and renameByDefault keeps its default'
  contains:
    id: {description: "The registry id: a validator rule's code (V(KGPU101)), any other kind C(<check>.<name>)
        (V(device_plugin.no_gpu_capacity)); docs/findings.md lists them all.", type: str}
    severity: {description: "V(error), V(warning) or V(info): one scale for every check.", type: str}
    title: {description: "What the kind is, in a line.", type: str}
    message: {description: "What was found here.", type: str}
    remedy: {description: "What to do.", type: str}
    where: {description: "The places that apply, of C(node), C(device), C(pool), C(object) (C(Kind namespace/name)), C(subject), C(pod),
        C(config), C(source), C(document), C(path), C(line), C(container).", type: dict}
    kind: {description: "Deprecated, removed in 2.0.0 (use C(id)): the name the kind was declared with (docs/findings.md).", type: str}
    config: {description: "Deprecated, removed in 2.0.0 (use C(where.config)): the config the finding is in.", type: str}
    path: {description: "Deprecated, removed in 2.0.0 (use C(where.path)): the path of the offending field.", type: str}
    problem: {description: "Deprecated, removed in 2.0.0 (use C(message)): what is wrong.", type: str}
report:
  description: One line per finding.
  returned: always
  type: list
  elements: str
"""

from collections import Counter
from typing import Any

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.fail_on import (
    REPORT_ONLY_OPTION,
    effective_fail_on,
    fails,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.severity import SEVERITIES
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import (
    CheckFailed,
    KubegpuError,
    OptionError,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.module import errors_fail
from ansible_collections.kubegpu.scheduling.plugins.module_utils.options.groups import (
    FAIL_ON,
    SOURCES,
    module_options,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_config import schema
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_config.sources import (
    HAS_YAML,
    ConfigSet,
    check_set,
    merged,
    report_lines,
    sets_from_definition,
    sets_from_text,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.manifests import expand_sources, read_text

ONE_OF = ("config", "configs", "src", "definition")


def argument_spec() -> dict[str, Any]:
    return module_options(
        dict(
            config={"type": "raw"},
            configs={"type": "dict"},
            default_config={"type": "str"},
            release={"type": "str", "choices": list(schema.RELEASES), "default": schema.DEFAULT_RELEASE},
            static_daemonset={"type": "bool", "default": False},
            report_only=dict(REPORT_ONLY_OPTION),
        ),
        (SOURCES, FAIL_ON),
    )


def file_sets(paths: list[str], default: str | None) -> list[ConfigSet]:
    """The config sets of each file that the paths, directories and globs of src name."""
    files, errors = expand_sources(paths)
    if errors:
        raise OptionError(f"src: {errors[0].source}: {errors[0].message}")
    sets = []
    for path in files:
        try:
            text = read_text(path)
        except KubegpuError as exc:
            raise OptionError(f"src: {path}: {exc.message}") from None
        sets += sets_from_text(text, path, default)
    return sets


def config_sets(params: dict[str, Any]) -> list[ConfigSet]:
    default = params["default_config"]
    if params["configs"] is not None:
        return [ConfigSet({str(k): v for k, v in params["configs"].items()}, default, "configs")]
    if params["config"] is not None:
        return [ConfigSet({"config": params["config"]}, default, "config")]
    sets = file_sets(params["src"] or [], default)
    if params["definition"] is not None:
        sets += sets_from_definition(params["definition"], default)
    if not sets:
        raise OptionError("src names no file")
    return sets


def main() -> None:
    module = AnsibleModule(
        argument_spec=argument_spec(),
        mutually_exclusive=[("config", "configs", "src"), ("config", "configs", "definition")],
        required_one_of=[ONE_OF],
        supports_check_mode=True,
    )
    with errors_fail(module):
        result = run(module)
    module.exit_json(**result)


def failure_message(findings: list[dict[str, Any]]) -> str:
    counts = Counter(f["severity"] for f in findings)
    found = " and ".join(f"{counts[s]} {s}(s)" for s in SEVERITIES if counts[s])
    return f"{found} in the device-plugin config: " + "; ".join(report_lines(findings)[:5])


def run(module: AnsibleModule) -> dict[str, Any]:
    params = module.params
    if not HAS_YAML:
        raise OptionError(missing_required_lib("PyYAML"))
    verdict = merged([check_set(s, params["release"], params["static_daemonset"]) for s in config_sets(params)])
    result = dict(verdict, report=report_lines(verdict["findings"]), changed=False)
    fail_on = effective_fail_on(params)
    failing = [f for f in verdict["findings"] if fails(f["severity"], fail_on)]
    if failing:
        raise CheckFailed(failure_message(failing), result=result)
    return result


if __name__ == "__main__":
    main()
