# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_host_facts
short_description: Driver, GPUs, toolkit hardening and GPU use outside Kubernetes on a GPU host
version_added: 1.0.0
description:
  - Runs on a GPU host over the ordinary Ansible connection and reports what the host itself says,
    the view the Kubernetes API cannot give.
  - "Driver presence: C(nvidia-smi) found and working (searched on E(PATH) and in C(/usr/bin), C(/usr/sbin),
    C(/bin), C(/sbin), C(/opt/bin) and C(/usr/local/nvidia/bin)), C(/proc/driver/nvidia/version), the NVIDIA
    kernel modules in C(/proc/modules), and the device nodes C(/dev/nvidiactl), C(/dev/nvidia-uvm) and
    C(/dev/nvidia[0-9]*)."
  - Per GPU, the index, name, UUID, memory, driver version and PCI bus id from
    C(nvidia-smi --query-gpu), and the model string GPU Feature Discovery and ACK would put in the node's
    product label (spaces become C(-)), also as a valid label value.
  - "Hardening of the NVIDIA container toolkit: whether each O(toolkit_config_paths) file sets
    C(accept-nvidia-visible-devices-envvar-when-unprivileged) to false and
    C(accept-nvidia-visible-devices-as-volume-mounts) to true, NVIDIA's recommendation. Absent keys take the
    toolkit's defaults (true and false), which leave the setting open."
  - GPU use outside Kubernetes, which the scheduler cannot see. Each compute process that C(nvidia-smi
    --query-compute-apps) lists is placed through C(/proc/<pid>/cgroup) (cgroup v1 or v2, systemd or cgroupfs
    driver, containerd, CRI-O or Docker) in a Kubernetes pod, in a container outside Kubernetes (for example
    C(docker run --gpus)) or directly on the host.
  - A host without NVIDIA hardware or driver is not an error. The result says V(no driver found) and lists
    what was looked for, unless O(require_driver=true).
  - The module must see the host's process table. When it runs in a container, that container needs the
    host's PID namespace.
author:
  - kubegpu.scheduling contributors (@kubegpu)
extends_documentation_fragment:
  - kubegpu.scheduling.read_only
options:
  require_driver:
    description:
      - Fail unless C(nvidia-smi) is found and answers the GPU query.
    type: bool
    default: false
  nvidia_smi:
    description:
      - Path of the C(nvidia-smi) binary to run. When unset, E(PATH) is searched, then the directories listed
        in the description under O(root).
    type: path
  toolkit_config_paths:
    description:
      - NVIDIA container toolkit config files to check, under O(root). A missing file is reported as such.
    type: list
    elements: path
    default:
      - /etc/nvidia-container-runtime/config.toml
      - /usr/local/nvidia/toolkit/.config/nvidia-container-runtime/config.toml
  root:
    description:
      - Directory the host's C(/proc), C(/dev), C(/etc) and standard binary directories are read under, for
        example V(/host) when the module runs in a container that mounts the host's file system there.
    type: path
    default: /
notes:
  - Read-only; always returns C(changed=false).
  - The facts are also set as C(ansible_facts.gpu_host).
"""

EXAMPLES = r"""
- name: Read the GPU facts of every GPU host
  kubegpu.scheduling.gpu_host_facts:
  register: gpu_host

- name: Fail a host where GPUs run outside Kubernetes or the toolkit is not hardened
  ansible.builtin.assert:
    that:
      - gpu_host.processes_outside_pods | length == 0
      - gpu_host.toolkit.hardened is not false
    fail_msg: "{{ gpu_host.problems }}"

- name: Require a working driver on the GPU node pool
  kubegpu.scheduling.gpu_host_facts:
    require_driver: true

- name: Read the host mounted at /host from inside a privileged container
  kubegpu.scheduling.gpu_host_facts:
    root: /host
    nvidia_smi: /host/usr/bin/nvidia-smi
"""

RETURN = r"""
driver_found:
  description: Whether any sign of the NVIDIA driver was found (working nvidia-smi, version file or kernel module).
  returned: always
  type: bool
  sample: true
driver_working:
  description: Whether nvidia-smi was found and answered the GPU query.
  returned: always
  type: bool
  sample: true
message:
  description: V(no driver found) when no sign of the driver was found, else null.
  returned: always
  type: str
  sample: no driver found
looked_for:
  description: What was looked for, when no driver was found.
  returned: always
  type: list
  elements: str
  sample: [nvidia-smi on PATH and in /usr/bin, /usr/sbin, /bin, /sbin, /opt/bin, /usr/local/nvidia/bin]
driver_version:
  description: The driver version nvidia-smi reports, else the kernel module's.
  returned: always
  type: str
  sample: 550.54.15
kernel_module:
  description: The kernel module's version line and the NVIDIA modules loaded.
  returned: always
  type: dict
  contains:
    version_file:
      description: From C(/proc/driver/nvidia/version); null when absent.
      type: dict
      sample: {version: 565.57.01, flavor: open, arch: x86_64}
    loaded:
      description: NVIDIA kernel modules listed in C(/proc/modules).
      type: list
      elements: str
      sample: [nvidia, nvidia_uvm, nvidia_modeset, nvidia_drm]
nvidia_smi:
  description: Which nvidia-smi ran and whether it worked.
  returned: always
  type: dict
  sample: {path: /usr/bin/nvidia-smi, works: true, error: null}
device_nodes:
  description: The NVIDIA device nodes present.
  returned: always
  type: dict
  sample: {nvidiactl: true, nvidia_uvm: true, gpus: [/dev/nvidia0, /dev/nvidia1]}
gpus:
  description: One entry per GPU from C(nvidia-smi --query-gpu).
  returned: always
  type: list
  elements: dict
  contains:
    index:
      description: The GPU's index.
      type: int
    name:
      description: The product name as nvidia-smi prints it.
      type: str
      sample: NVIDIA H100 80GB HBM3
    uuid:
      description: The GPU UUID.
      type: str
    memory_total_mib:
      description: Total memory in MiB.
      type: int
      sample: 81559
    driver_version:
      description: Driver version.
      type: str
    pci_bus_id:
      description: PCI bus id.
      type: str
      sample: 00000000:00:09.0
    product_label:
      description: The value GPU Feature Discovery and ACK write to their product label (spaces become C(-)).
      type: str
      sample: NVIDIA-H100-80GB-HBM3
    model_label_value:
      description: The product name made a valid label value.
      type: str
      sample: NVIDIA-H100-80GB-HBM3
gpu_count:
  description: Number of GPUs nvidia-smi lists.
  returned: always
  type: int
  sample: 8
models:
  description: The distinct product labels of the host's GPUs; more than one means mixed models.
  returned: always
  type: list
  elements: str
  sample: [NVIDIA-H100-80GB-HBM3]
toolkit:
  description: Each toolkit config checked, and whether all present ones are hardened (null when none exists).
  returned: always
  type: dict
  sample:
    hardened: false
    configs:
      - path: /etc/nvidia-container-runtime/config.toml
        exists: true
        envvar_when_unprivileged: true
        volume_mounts: false
        explicit: []
        hardened: false
        error: null
processes:
  description:
    - Compute processes on the GPUs and where each runs, V(pod), V(container) (outside Kubernetes),
      V(host) or V(unknown) (the process ended or its cgroup could not be read).
  returned: always
  type: list
  elements: dict
  sample:
    - pid: 4242
      process_name: python
      gpu_uuid: GPU-22b2c6ac-2d49-4863-197c-9c469071178a
      gpu_index: 0
      used_memory_mib: 1536
      where: container
      pod_uid: null
      container_id: 2403ccfe427f1dc7b6120dccb9ac58c2f8456950380d587a9f33ea7f00dd303d
      runtime: docker
      cgroup: /docker/2403ccfe427f1dc7b6120dccb9ac58c2f8456950380d587a9f33ea7f00dd303d
processes_outside_pods:
  description: The processes whose C(where) is V(container) or V(host).
  returned: always
  type: list
  elements: dict
problems:
  description: What needs attention on this host, one sentence each.
  returned: always
  type: list
  elements: str
  sample:
    - >-
      /etc/nvidia-container-runtime/config.toml: accept-nvidia-visible-devices-envvar-when-unprivileged is true,
      so unprivileged containers get GPUs through NVIDIA_VISIBLE_DEVICES
"""

import os
from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.kubegpu.scheduling.plugins.module_utils.host.probe import host_report
from ansible_collections.kubegpu.scheduling.plugins.module_utils.host.reads import DEFAULT_TOOLKIT_CONFIGS, read_host
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import CheckFailed, OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.module import errors_fail


def argument_spec() -> dict[str, Any]:
    return {
        "require_driver": {"type": "bool", "default": False},
        "nvidia_smi": {"type": "path"},
        "toolkit_config_paths": {"type": "list", "elements": "path", "default": list(DEFAULT_TOOLKIT_CONFIGS)},
        "root": {"type": "path", "default": "/"},
    }


def host_facts(module: AnsibleModule) -> dict[str, Any]:
    params = module.params
    if not os.path.isdir(params["root"]):
        raise OptionError(f"root {params['root']} is not a directory")
    readings = read_host(
        params["root"], params["nvidia_smi"], params["toolkit_config_paths"], module.run_command, module.warn
    )
    facts = host_report(readings)
    if params["require_driver"] and not facts["driver_working"]:
        raise CheckFailed(
            "require_driver: " + "; ".join(facts["problems"][:1] or ["nvidia-smi does not work"]), result=facts
        )
    return facts


def main() -> None:
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    with errors_fail(module):
        facts = host_facts(module)
    module.exit_json(changed=False, ansible_facts={"gpu_host": facts}, **facts)


if __name__ == "__main__":
    main()
