# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU system components: the device plugins, feature discovery, drivers, toolkits, monitors
and DRA kubelet plugins that are meant to see every GPU of a node, run privileged or mount the
host's devices, and so bypass the scheduler on purpose.

A pod spec is recognised as a component by what it runs, never by its name, labels or namespace:
every container (init and ephemeral ones included) must run one of the component's images, and
either the image's own entrypoint (no command, no args) or one of the component's published
command lines. An image matches by the tail of its repository path, so that a private mirror
(`registry-vpc.<region>.aliyuncs.com/acs/...`, `harbor.example.com/mirror/nvidia/...`) still
matches; tags and digests are ignored. The namespaces are where each component usually runs:
information for other checks, not a criterion here.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.amd_components import AMD_COMPONENTS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.component import ANY_ARGUMENTS, Component
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.published_commands import (
    GKE_CONTAINER_TOOLKIT_INSTALL,
    GKE_COS_INSTALL,
    GKE_COS_INSTALL_LATEST,
    GKE_NCCL_RDMA_INSTALLS,
    GKE_NCCL_TCPX_INSTALL,
    GKE_NCCL_TCPXO_INSTALL,
    GKE_RDMA_LOG_MARTIANS,
    GKE_TCPXO_APERTURES,
    GKE_TCPXO_IPTABLES,
    OPENSHIFT_DTK_BUILD,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError

COMPONENT_KEYS = ("name", "images", "commands", "entrypoint_args", "namespaces")
_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


def image_repository(image: str) -> str:
    """The repository of an image reference, lower case, without tag or digest."""
    name = image.strip().split("@", 1)[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:
        name = name[:colon]
    return name.lower()


def repository_tails(image: str) -> list[str]:
    """Every tail of the repository path: `a.io/b/c` gives `a.io/b/c`, `b/c` and `c`."""
    parts = image_repository(image).split("/")
    return ["/".join(parts[i:]) for i in range(len(parts))]


class ComponentCatalogue:
    """The components, indexed by image tail for a quick refusal of ordinary pods."""

    def __init__(self, components: Iterable[Component] = ()) -> None:
        self.components: tuple[Component, ...] = tuple(components)
        self._by_tail: dict[str, list[Component]] = {}
        for component in self.components:
            for image in (*component.images, *component.helper_images):
                self._by_tail.setdefault(image_repository(image), []).append(component)
        self._tails: dict[str, list[str]] = {}

    def __bool__(self) -> bool:
        return bool(self.components)

    def _known_tails(self, image: object) -> list[str]:
        if not isinstance(image, str) or not image:
            return []
        known = self._tails.get(image)
        if known is None:
            if len(self._tails) > 4096:
                self._tails.clear()
            known = self._tails[image] = [t for t in repository_tails(image) if t in self._by_tail]
        return known

    def recognise(self, spec: Mapping[str, Any]) -> Component | None:
        """The component the pod spec runs, or None: every container must be the component's own."""
        containers = list(_all_containers(spec))
        if not self._by_tail or not containers or not isinstance(spec.get("containers"), list):
            return None
        tails = [self._known_tails(c.get("image")) for c in containers]
        if not all(tails):
            return None
        candidates = {id(c): c for tail in tails[0] for c in self._by_tail[tail]}
        for component in candidates.values():
            if all(component.runs(c, t) for c, t in zip(containers, tails, strict=True)) and any(
                component.own_image(t) for t in tails
            ):
                return component
        return None


def _all_containers(spec: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for list_name in _CONTAINER_LISTS:
        containers = spec.get(list_name)
        if isinstance(containers, list):
            for container in containers:
                yield container if isinstance(container, dict) else {}


def component_reason(component: Component) -> str:
    return f"known GPU system component: {component.name}"


# --- The built-in catalogue ------------------------------------------------------------------

# The GPU Operator fills every image of its operands (assets/state-*/*daemonset*.yaml) from the
# ClusterPolicy; the defaults are in deployments/gpu-operator/values.yaml. Its init containers
# wait for the validator's status files with the validator's image (the gpu-operator image since
# v24; gpu-operator-validator before).
_OPERATOR_SOURCE = "NVIDIA/gpu-operator assets/state-*/*daemonset*.yaml, deployments/gpu-operator/values.yaml"
_OPERATOR_NAMESPACES = ("gpu-operator", "gpu-operator-resources", "nvidia-gpu-operator")
_VALIDATOR_IMAGES = ("nvidia/gpu-operator", "nvidia/cloud-native/gpu-operator-validator")
_DRIVER_MANAGER_IMAGES = ("nvidia/cloud-native/k8s-driver-manager",)
_WAIT_TOOLKIT = (
    "sh",
    "-c",
    "until [ -f /run/nvidia/validations/toolkit-ready ]; do echo waiting for nvidia container stack to be setup; "
    "sleep 5; done",
)
_WAIT_TOOLKIT_MIG = (
    "sh",
    "-c",
    "until [ -f /run/nvidia/validations/toolkit-ready ]; do echo waiting for nvidia container toolkit to be setup; "
    "sleep 5; done",
)
_VALIDATOR = ("sh", "-c", "nvidia-validator")
_VALIDATOR_IDLE = ("sh", "-c", "echo all validations are successful; while true; do sleep 86400; done")
_CONFIG_MANAGER = ("config-manager",)
_ENTRYPOINT_SCRIPT = ("/bin/sh", "-c", "/bin/entrypoint.sh")
_UNINSTALL_DRIVER = ("driver-manager", "uninstall_driver")
# On OpenShift with the Driver Toolkit (manifests/state-driver/0500_daemonset.yaml, transformOpenShiftDriverToolkitContainer
# in controllers/object_controls.go) the driver, GDS and GDRCopy containers start from the toolkit's entrypoint,
# and a side-car from the cluster's driver-toolkit image (or the driver image) builds the driver.
_OPENSHIFT_DTK = tuple(
    ("ocp_dtk_entrypoint", run) for run in ("nv-ctr-run-with-dtk", "nv-fs-ctr-run-with-dtk", "gdrcopy-ctr-run-with-dtk")
)
_OPENSHIFT_DTK_IMAGES = ("openshift-release-dev/ocp-v4.0-art-dev",)


def _operand(
    name: str, images: tuple[str, ...], commands: tuple[tuple[str, ...], ...], helper_images: tuple[str, ...] = ()
) -> Component:
    """A GPU Operator operand: deployed in the operator's namespaces from its published assets."""
    return Component(
        name,
        images,
        commands,
        namespaces=_OPERATOR_NAMESPACES,
        source=_OPERATOR_SOURCE,
        helper_images=helper_images,
    )


def _wait_driver(then: str) -> tuple[str, ...]:
    return (
        "bash",
        "-xc",
        "until [ -d /run/nvidia/driver/usr/src ] && lsmod | grep nvidia; do echo  Waiting for nvidia-driver to be "
        f"installed...; sleep 10; done; exec {then}",
    )


def _wait_workload(workload: str, what: str, ready: str, waiting: str) -> tuple[str, ...]:
    return (
        "sh",
        "-c",
        "until [ -f /run/nvidia/validations/workload-type ]; do echo waiting for workload type status file; sleep 5; "
        f'done; if [ "$(cat /run/nvidia/validations/workload-type)" != "{workload}" ]; then echo {what} not needed, '
        f"skipping validation; exit 0; fi; until [ -f /run/nvidia/validations/{ready} ]; do echo {waiting}; "
        "sleep 5; done;",
    )


# NVIDIA's DRA driver for GPUs (templates/kubeletplugin.yaml of its chart): each kubelet-plugin
# container masks the driver's params file under nvkind, then starts its plugin.
_DRA_MASK_PARAMS = (
    "# Conditionally mask the params file to prevent this container from\n"
    "# recreating any missing GPU device nodes. This is necessary, for\n"
    "# example, when running under nvkind to limit the set GPUs governed\n"
    "# by the plugin even though it has cgroup access to all of them.\n"
    'if [ "${MASK_NVIDIA_DRIVER_PARAMS}" = "true" ]; then\n'
    "  cp /proc/driver/nvidia/params /root/gpu-params\n"
    "  sed -i 's/^ModifyDeviceFiles: 1$/ModifyDeviceFiles: 0/' /root/gpu-params\n"
    "  mount --bind /root/gpu-params /proc/driver/nvidia/params\n"
    "fi\n"
)
_DRA_PLUGINS = ("gpu-kubelet-plugin -v $(LOG_VERBOSITY)", "compute-domain-kubelet-plugin -v $(LOG_VERBOSITY)")

# Koordinator's node agent and device daemon (config/manager/koordlet.yaml, koord-device-daemon.yaml;
# the charts fill ghcr.io/koordinator-sh/<name>, kustomize leaves the bare name).
_GKE_SOURCE = "GoogleCloudPlatform/container-engine-accelerators "
_KOORD_SOURCE = "koordinator-sh/koordinator config/manager/koordlet.yaml, config/manager/koord-device-daemon.yaml"
_KOORD_NAMESPACES = ("koordinator-system",)


def _koordinator(title: str, binary: str) -> Component:
    """One of Koordinator's node agents: its image (koordinator-sh/<binary>) runs /<binary>."""
    return Component(
        f"Koordinator {title}",
        (f"koordinator-sh/{binary}", binary),
        ((f"/{binary}", ANY_ARGUMENTS),),
        namespaces=_KOORD_NAMESPACES,
        source=_KOORD_SOURCE,
    )


_DEVICE_PLUGIN_IMAGES = ("nvidia/k8s-device-plugin",)

BUILTIN_COMPONENTS: tuple[Component, ...] = (
    Component(
        "NVIDIA device plugin",
        # ACK's static pods and ack-nvidia-device-plugin run NVIDIA's plugin from ACK's registry (acs/).
        (*_DEVICE_PLUGIN_IMAGES, "acs/k8s-device-plugin"),
        (
            ("nvidia-device-plugin", ANY_ARGUMENTS),
            ("/usr/bin/nvidia-device-plugin", ANY_ARGUMENTS),
            _CONFIG_MANAGER,
            _ENTRYPOINT_SCRIPT,
            _WAIT_TOOLKIT,
        ),
        entrypoint_args=True,
        namespaces=("kube-system", "nvidia-device-plugin", *_OPERATOR_NAMESPACES),
        source="NVIDIA/k8s-device-plugin deployments/static/nvidia-device-plugin.yml, "
        "deployments/helm/nvidia-device-plugin/templates/daemonset-device-plugin.yml; " + _OPERATOR_SOURCE,
        helper_images=_VALIDATOR_IMAGES,
    ),
    Component(
        "NVIDIA GPU Feature Discovery",
        (*_DEVICE_PLUGIN_IMAGES, "nvidia/gpu-feature-discovery"),
        (
            ("gpu-feature-discovery", ANY_ARGUMENTS),
            ("/usr/bin/gpu-feature-discovery", ANY_ARGUMENTS),
            _CONFIG_MANAGER,
            _WAIT_TOOLKIT,
        ),
        namespaces=("kube-system", "nvidia-device-plugin", "gpu-feature-discovery", *_OPERATOR_NAMESPACES),
        source="NVIDIA/k8s-device-plugin deployments/static/gpu-feature-discovery-daemonset.yaml, "
        "templates/daemonset-gfd.yml; " + _OPERATOR_SOURCE,
        helper_images=_VALIDATOR_IMAGES,
    ),
    Component(
        "NVIDIA MPS control daemon",
        _DEVICE_PLUGIN_IMAGES,
        (("mps-control-daemon",), ("mps-control-daemon", "mount-shm"), _CONFIG_MANAGER, _WAIT_TOOLKIT),
        namespaces=("nvidia-device-plugin", *_OPERATOR_NAMESPACES),
        source="NVIDIA/k8s-device-plugin templates/daemonset-mps-control-daemon.yml; " + _OPERATOR_SOURCE,
        helper_images=_VALIDATOR_IMAGES,
    ),
    _operand(
        "NVIDIA GPU Operator driver",
        ("nvidia/driver", "nvidia/cloud-native/nvidia-fs", "nvidia/cloud-native/gdrdrv"),
        (
            _UNINSTALL_DRIVER,
            # The driver's args of the ClusterPolicy or NVIDIADriver (spec.driver.args) follow init.
            ("nvidia-driver", "init", ANY_ARGUMENTS),
            ("nvidia-driver", "reload_nvidia_peermem"),
            _wait_driver("nvidia-gds-driver install"),
            _wait_driver("nvidia-gdrcopy-driver install"),
            *_OPENSHIFT_DTK,
            OPENSHIFT_DTK_BUILD,
        ),
        (*_DRIVER_MANAGER_IMAGES, *_OPENSHIFT_DTK_IMAGES),
    ),
    _operand(
        "NVIDIA GPU Operator container toolkit",
        ("nvidia/k8s/container-toolkit",),
        (_VALIDATOR, _ENTRYPOINT_SCRIPT),
        _VALIDATOR_IMAGES,
    ),
    Component(
        "NVIDIA GPU Operator validator",
        _VALIDATOR_IMAGES,
        (_VALIDATOR, _VALIDATOR_IDLE),
        namespaces=_OPERATOR_NAMESPACES,
        source=_OPERATOR_SOURCE + " (state-operator-validation, state-sandbox-validation)",
    ),
    _operand(
        "NVIDIA GPU Operator node status exporter",
        _VALIDATOR_IMAGES,
        (("nvidia-validator",),),
    ),
    _operand(
        "NVIDIA DCGM",
        ("nvidia/cloud-native/dcgm",),
        (_WAIT_TOOLKIT,),
        _VALIDATOR_IMAGES,
    ),
    Component(
        "NVIDIA DCGM exporter",
        ("nvidia/k8s/dcgm-exporter",),
        (_WAIT_TOOLKIT,),
        entrypoint_args=True,
        namespaces=("dcgm-exporter", "monitoring", "kube-system", *_OPERATOR_NAMESPACES),
        source="NVIDIA/dcgm-exporter deployment/templates/daemonset.yaml; " + _OPERATOR_SOURCE,
        helper_images=_VALIDATOR_IMAGES,
    ),
    _operand(
        "NVIDIA GPU Operator MIG manager",
        ("nvidia/cloud-native/k8s-mig-manager",),
        (_WAIT_TOOLKIT_MIG, _ENTRYPOINT_SCRIPT),
        _VALIDATOR_IMAGES,
    ),
    Component(
        "NVIDIA GPU Operator sandbox device plugin",
        ("nvidia/kubevirt-gpu-device-plugin",),
        (
            _wait_workload("vm-passthrough", "vfio-pci", "vfio-pci-ready", "waiting for vfio-pci driver ..."),
            _wait_workload("vm-vgpu", "vgpu-devices", "vgpu-devices-ready", "waiting for vGPU devices..."),
        ),
        entrypoint_args=True,
        namespaces=_OPERATOR_NAMESPACES,
        source=_OPERATOR_SOURCE,
        helper_images=_VALIDATOR_IMAGES,
    ),
    Component(
        "NVIDIA GPU Operator Kata sandbox device plugin",
        ("nvidia/cloud-native/nvidia-sandbox-device-plugin",),
        (_wait_workload("vm-passthrough", "kata", "vfio-pci-ready", "waiting for vfio-pci driver ..."),),
        entrypoint_args=True,
        namespaces=_OPERATOR_NAMESPACES,
        source=_OPERATOR_SOURCE,
        helper_images=_VALIDATOR_IMAGES,
    ),
    _operand(
        "NVIDIA GPU Operator VFIO manager",
        _DRIVER_MANAGER_IMAGES,
        (_UNINSTALL_DRIVER, ("/bin/sh", "-c", "vfio-manage bind --all && while true; do sleep 86400; done")),
    ),
    _operand(
        "NVIDIA vGPU manager",
        ("vgpu-manager",),
        (_UNINSTALL_DRIVER, ("nvidia-driver", "init")),
        _DRIVER_MANAGER_IMAGES,
    ),
    _operand(
        "NVIDIA vGPU device manager",
        ("nvidia/cloud-native/vgpu-device-manager",),
        (
            (
                "sh",
                "-c",
                "until [ -f /run/nvidia/validations/vgpu-manager-ready ] || [ -f "
                "/run/nvidia/validations/host-vgpu-manager-ready ]; do echo waiting for NVIDIA vGPU Manager to be "
                "setup; sleep 5; done",
            ),
        ),
        _VALIDATOR_IMAGES,
    ),
    Component(
        "NVIDIA GPU Operator confidential computing manager",
        ("nvidia/cloud-native/k8s-cc-manager",),
        namespaces=_OPERATOR_NAMESPACES,
        source=_OPERATOR_SOURCE,
    ),
    Component(
        "NVIDIA DRA driver for GPUs, kubelet plugin",
        ("dra-driver-nvidia/dra-driver-nvidia-gpu", "nvidia/k8s-dra-driver-gpu", "nvidia/dra-driver-nvidia-gpu"),
        (
            ("bash", "/usr/bin/kubelet-plugin-prestart.sh"),
            *(("bash", "-c", _DRA_MASK_PARAMS + plugin) for plugin in _DRA_PLUGINS),
            *(("bash", "-c", plugin) for plugin in _DRA_PLUGINS),
        ),
        namespaces=("nvidia-dra-driver-gpu", "dra-driver-nvidia-gpu", *_OPERATOR_NAMESPACES),
        source="NVIDIA/k8s-dra-driver-gpu deployments/helm/dra-driver-nvidia-gpu/templates/kubeletplugin.yaml",
    ),
    Component(
        "GKE NVIDIA GPU device plugin",
        ("gke-release/nvidia-gpu-device-plugin", "google-containers/nvidia-gpu-device-plugin"),
        (("/usr/bin/nvidia-gpu-device-plugin", ANY_ARGUMENTS),),
        namespaces=("kube-system",),
        source="GoogleCloudPlatform/container-engine-accelerators cmd/nvidia_gpu/device-plugin.yaml",
    ),
    Component(
        "GKE NVIDIA driver installer",
        ("cos-nvidia-installer", "gke-nvidia-installer", "gke-release/nvidia-partition-gpu"),
        (("bash", "-c", GKE_COS_INSTALL), ("bash", "-c", GKE_COS_INSTALL_LATEST)),
        namespaces=("kube-system",),
        source="GoogleCloudPlatform/container-engine-accelerators nvidia-driver-installer/{cos,ubuntu}/daemonset-preloaded.yaml, "
        "cos/daemonset-preloaded-latest.yaml, cos/daemonset-preloaded-latest-a4x.yaml",
        helper_images=("pause",),
    ),
    Component(
        "GKE NCCL RDMA installer",
        ("gce-ai-infra/gpudirect-gib/nccl-plugin-gib", "gce-ai-infra/gpudirect-gib/nccl-plugin-gib-arm64"),
        (*GKE_NCCL_RDMA_INSTALLS, *GKE_RDMA_LOG_MARTIANS, GKE_CONTAINER_TOOLKIT_INSTALL),
        namespaces=("kube-system",),
        source=_GKE_SOURCE + "gpudirect-rdma/nccl-rdma-installer.yaml, nccl-rdma-installer-autopilot.yaml, "
        "nccl-rdma-installer-a4x.yaml (its container toolkit installer at c7f8e870)",
        # The log-martians init container (alpine) and the container toolkit installer (ubuntu) of earlier versions.
        helper_images=("pause", "alpine", "ubuntu"),
    ),
    Component(
        "GKE NCCL TCPX installer",
        ("gce-ai-infra/gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev",),
        (GKE_NCCL_TCPX_INSTALL,),
        namespaces=("kube-system",),
        source=_GKE_SOURCE + "gpudirect-tcpx/nccl-tcpx-installer.yaml, nccl-tcpx-installer-autopilot.yaml",
        helper_images=("pause",),
    ),
    Component(
        "GKE NCCL TCPXO installer",
        ("gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev",),
        (GKE_NCCL_TCPXO_INSTALL, GKE_TCPXO_APERTURES, GKE_TCPXO_IPTABLES),
        namespaces=("kube-system",),
        source=_GKE_SOURCE + "gpudirect-tcpxo/nccl-tcpxo-installer.yaml, nccl-tcpxo-installer-autopilot.yaml",
        helper_images=("pause", "ubuntu"),
    ),
    Component(
        "Kubernetes DRA example driver, kubelet plugin",
        ("dra-example-driver/dra-example-driver",),
        (("dra-example-kubeletplugin", ANY_ARGUMENTS),),
        namespaces=("dra-example-driver",),
        source="kubernetes-sigs/dra-example-driver deployments/helm/dra-example-driver/templates/kubeletplugin.yaml",
    ),
    _koordinator("koordlet", "koordlet"),
    _koordinator("device daemon", "koord-device-daemon"),
    Component(
        "GKE NRI device injector",
        ("gke-release/nri-device-injector",),
        namespaces=("kube-system",),
        source="GoogleCloudPlatform/container-engine-accelerators nri_device_injector/nri-device-injector.yaml",
    ),
    Component(
        "Alibaba GPU sharing device plugin (gpushare)",
        ("acs/k8s-gpushare-plugin",),
        (("gpushare-device-plugin-v2", ANY_ARGUMENTS), ("gpushare-device-plugin", ANY_ARGUMENTS)),
        namespaces=("kube-system",),
        source="AliyunContainerService/gpushare-device-plugin device-plugin-ds.yaml",
    ),
    Component(
        "Volcano device plugin",
        ("volcanosh/volcano-device-plugin",),
        entrypoint_args=True,
        namespaces=("kube-system", "volcano-system"),
        source="volcano-sh/devices volcano-device-plugin.yml",
    ),
    Component(
        "HAMi device plugin",
        ("projecthami/hami",),
        (("nvidia-device-plugin", ANY_ARGUMENTS), ("vGPUmonitor", ANY_ARGUMENTS)),
        namespaces=("kube-system", "hami-system"),
        source="Project-HAMi/HAMi charts/hami/templates/device-plugin/daemonsetnvidia.yaml",
    ),
    *AMD_COMPONENTS,
    Component(
        "Intel GPU plugin",
        ("intel/intel-gpu-plugin", "intel/intel-gpu-initcontainer"),
        entrypoint_args=True,
        namespaces=("kube-system", "inteldeviceplugins-system"),
        source="intel/intel-device-plugins-for-kubernetes deployments/gpu_plugin",
    ),
)

BUILTIN_CATALOGUE = ComponentCatalogue(BUILTIN_COMPONENTS)
NO_CATALOGUE = ComponentCatalogue()


# --- The option ------------------------------------------------------------------------------


def _text_list(value: object, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise OptionError(f"{where} must be a list of non-empty strings, got {value!r}")
    return tuple(v.strip() for v in value)


def component_from_entry(entry: object, where: str) -> Component:
    """One user entry: {name, images, commands, entrypoint_args, namespaces}. Raises OptionError."""
    if not isinstance(entry, Mapping):
        raise OptionError(f"{where} must be a dictionary with name and images, got {entry!r}")
    unknown = sorted(str(k) for k in entry if k not in COMPONENT_KEYS)
    if unknown:
        raise OptionError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(COMPONENT_KEYS)}")
    name = entry.get("name")
    if not isinstance(name, str) or not name.strip():
        raise OptionError(f"{where}.name must be a non-empty string, got {name!r}")
    where = f"{where} ({name.strip()})"
    if entry.get("images") is None:
        raise OptionError(f"{where}: images is required (the image repositories the component runs)")
    images = tuple(image_repository(i) for i in _text_list(entry["images"], f"{where}.images"))
    commands_value = entry.get("commands") or []
    if not isinstance(commands_value, list):
        raise OptionError(
            f"{where}.commands must be a list of command lines (lists of strings), got {commands_value!r}"
        )
    commands = []
    for index, command in enumerate(commands_value):
        if isinstance(command, str) or not isinstance(command, list) or not command:
            raise OptionError(
                f"{where}.commands[{index}] must be a non-empty list of strings (command then args), got {command!r}"
            )
        if not all(isinstance(part, str) for part in command):
            raise OptionError(f"{where}.commands[{index}] must hold only strings, got {command!r}")
        commands.append(tuple(command))
    entrypoint_args = entry.get("entrypoint_args", False)
    if not isinstance(entrypoint_args, bool):
        raise OptionError(f"{where}.entrypoint_args must be true or false, got {entrypoint_args!r}")
    namespaces = _text_list(entry["namespaces"], f"{where}.namespaces") if entry.get("namespaces") else ()
    return Component(name.strip(), images, tuple(commands), entrypoint_args, namespaces, "user")


def catalogue_from_option(value: object, option: str = "system_components") -> ComponentCatalogue:
    """The option {builtin: bool, extra: [entries]} as a catalogue; None means the built-in one."""
    if value is None:
        return BUILTIN_CATALOGUE
    if not isinstance(value, Mapping):
        raise OptionError(f"{option} must be a dictionary with builtin and extra, got {value!r}")
    unknown = sorted(str(k) for k in value if k not in ("builtin", "extra"))
    if unknown:
        raise OptionError(f"{option}: unknown key(s) {', '.join(unknown)}; known: builtin, extra")
    builtin = value.get("builtin", True)
    if builtin is None:
        builtin = True
    if not isinstance(builtin, bool):
        raise OptionError(f"{option}.builtin must be true or false, got {builtin!r}")
    extra = extra_components(value.get("extra"), f"{option}.extra")
    return catalogue_of(builtin, extra)


def extra_components(value: object, where: str) -> list[Component]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise OptionError(f"{where} must be a list of components, got {value!r}")
    return [component_from_entry(entry, f"{where}[{index}]") for index, entry in enumerate(value)]


def catalogue_of(builtin: bool, extra: Sequence[Component] = ()) -> ComponentCatalogue:
    if builtin and not extra:
        return BUILTIN_CATALOGUE
    return ComponentCatalogue((*(BUILTIN_COMPONENTS if builtin else ()), *extra))
