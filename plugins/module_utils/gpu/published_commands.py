# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The long command lines of GPU system components, exactly as their manifests publish them (a
shell's script is compared whole): the GKE installers' scripts, the GPU Operator's OpenShift
Driver Toolkit side-car and the AMD GPU Operator's wait for its driver."""

from __future__ import annotations

# GKE's COS driver installer (nvidia-driver-installer/cos/daemonset-preloaded.yaml), and the latest driver
# (daemonset-preloaded-latest.yaml, daemonset-preloaded-latest-a4x.yaml, since 2024-07).
_GKE_COS_INSTALL = (
    'echo "Checking for existing GPU driver modules"\n'
    "if lsmod | grep nvidia; then\n"
    '  echo "GPU driver is already installed, the installed version may or may not be the driver version being '
    'tried to install, skipping installation"\n'
    "  exit 0\n"
    "else\n"
    '  echo "No GPU driver module detected, installing now"\n'
    "{install}"
    "fi\n"
)
GKE_COS_INSTALL = _GKE_COS_INSTALL.format(install="  /cos-gpu-installer install || exit 1\n")
GKE_COS_INSTALL_LATEST = _GKE_COS_INSTALL.format(
    install="  /cos-gpu-installer install --version=latest || exit 1\n  chmod 755 /root/home/kubernetes/bin/nvidia\n"
)

# GKE's NCCL plugin installers for GPUDirect (gpudirect-rdma/nccl-rdma-installer*.yaml,
# gpudirect-tcpx/nccl-tcpx-installer*.yaml, gpudirect-tcpxo/nccl-tcpxo-installer*.yaml): an init container
# copies the plugin into the driver's library directory on the host, then a pause container holds the pod.
# The RDMA installer's script ran `install --install-nccl` until 2026-05 (2da1c92f), and still does in its
# Autopilot variant.
_GKE_GIB_INSTALL = (
    "set -ex\n/scripts/container_entry.sh install{flags}\ncp -r /var/lib/gib/lib64/. "
    "/usr/local/home/kubernetes/bin/nvidia/lib64\n"
    'cp -r /var/lib/gib/. /usr/local/home/kubernetes/bin/gib\necho "installation finishes"\n'
)
GKE_NCCL_RDMA_INSTALL = ("/bin/sh", "-c", _GKE_GIB_INSTALL.format(flags=""))
GKE_NCCL_RDMA_INSTALLS = (GKE_NCCL_RDMA_INSTALL, ("/bin/sh", "-c", _GKE_GIB_INSTALL.format(flags=" --install-nccl")))
# Until 2025-07 (bdd28b0f) an alpine init container first silenced martian-packet logs on the RDMA NICs:
# gpu0rdma0 to gpu7rdma0 (A3 Ultra, A4), gpu0rdma0 to gpu3rdma0 (A4X).
GKE_RDMA_LOG_MARTIANS = tuple(
    ("/bin/sh", "-c", "".join(f"sysctl -w net.ipv4.conf.gpu{n}rdma0.log_martians=0\n" for n in range(nics)))
    for nics in (8, 4)
)
# The A4X installer of 2025-05 (c7f8e870) installed the NVIDIA Container Toolkit next to GKE's driver from
# an ubuntu init container before the plugin.
GKE_CONTAINER_TOOLKIT_INSTALL = (
    "bash",
    "-c",
    "set -ex\nif [ -f /host/home/kubernetes/bin/nvidia/nvidia-ctk ]; then\n"
    '  echo "NVIDIA Container Toolkit already exists, skipping installation."\nelse\n'
    '  echo "Installing NVIDIA Container Toolkit..."\n\n  while true; do\n'
    '    DRIVER_VERSION=$("/host/home/kubernetes/bin/nvidia/bin/nvidia-smi" --query-gpu=driver_version '
    "--format=csv,noheader --id=0 2>&1)\n\n"
    '    if [ $? -eq 0 ] && [ -n "$DRIVER_VERSION" ]; then\n'
    '      echo "NVIDIA driver detected: version $DRIVER_VERSION"\n      break\n    else\n'
    '      echo "NVIDIA driver not available yet. Retrying in 5 seconds..."\n      sleep 5\n    fi\n  done\n\n'
    "  apt update\n  apt install -y curl gnupg2 ca-certificates\n\n"
    "  curl -fsSL https://nvidia.github.io/libnvidia-container/gpgkey | \\\n"
    "    gpg --dearmor -o /usr/share/keyrings/nvidia-container-toolkit-keyring.gpg\n\n"
    "  curl -s -L https://nvidia.github.io/libnvidia-container/stable/deb/nvidia-container-toolkit.list | \\\n"
    "    sed 's#deb https://#deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] https://#g' "
    "| \\\n"
    "    tee /etc/apt/sources.list.d/nvidia-container-toolkit.list\n\n"
    "  apt update\n  apt install -y nvidia-container-toolkit\n\n"
    '  cp /usr/bin/nvidia-* /host/home/kubernetes/bin/nvidia\n  echo "NVIDIA Container Toolkit installation complete."\n'
    "fi\n",
)
GKE_NCCL_TCPX_INSTALL = (
    "/bin/sh",
    "-c",
    "set -ex\n/scripts/container_entry.sh install --install-nccl\nmkdir -p /usr/local/nvidia/lib64\n"
    'cp -r /var/lib/tcpx/lib64/. /usr/local/nvidia/lib64\necho "installation finishes"\n',
)
GKE_NCCL_TCPXO_INSTALL = (
    "/bin/sh",
    "-c",
    "set -ex\nchmod 755 /scripts/container_entry.sh\n/scripts/container_entry.sh install --install-nccl\n"
    'mkdir -p /usr/local/nvidia/lib64\ncp -r /var/lib/tcpxo/lib64/. /usr/local/nvidia/lib64\necho "installation finishes"\n',
)
# The TCPXO installer's init containers run their script in the host's namespaces.
_ON_HOST = ("nsenter", "-at", "1", "--", "sh", "-c")
GKE_TCPXO_APERTURES = (
    *_ON_HOST,
    "/sbin/iptables -I INPUT -p tcp -m tcp -j ACCEPT && modprobe import-helper\nsudo mkdir -p /dev/aperture_devices\n"
    "while IFS= read -r line; do\n  BDF=$( echo \"$line\" | awk '{print $1}' );\n"
    '  target_aperture_path="/dev/aperture_devices/$BDF"\n'
    '  host_aperture_device=$(readlink -f "/sys/bus/pci/devices/$BDF");\n  sudo mkdir -p $target_aperture_path;\n'
    "  sudo umount -R $target_aperture_path;\n  sudo mount --bind $host_aperture_device $target_aperture_path;\n"
    "done < <(lspci -nn -D | grep '1ae0:0084')\nif [ -d /dev/aperture_devices ]; then\n"
    "    chmod -R a+r /dev/aperture_devices/\n    chmod a+rw /dev/aperture_devices/*/resource*\nfi\n",
)
# Before 2024-06 (f0422385) the TCPXO installer's ubuntu init container only opened TCP and loaded the helper.
GKE_TCPXO_IPTABLES = (
    *_ON_HOST,
    "/sbin/iptables -I INPUT -p tcp -m tcp -j ACCEPT && modprobe import-helper",
)
# The GPU Operator driver's OpenShift Driver Toolkit side-car (manifests/state-driver/0500_daemonset.yaml).
OPENSHIFT_DTK_BUILD = (
    "bash",
    "-xc",
    "until [ -f /mnt/shared-nvidia-driver-toolkit/dir_prepared ]; do echo  Waiting for nvidia-driver-ctr container to "
    "prepare the shared directory ...; sleep 10; done; exec /mnt/shared-nvidia-driver-toolkit/ocp_dtk_entrypoint "
    "dtk-build-driver",
)

# The AMD GPU Operator's operands wait for the amdgpu driver in a busybox init container: as its example
# publishes it, and as internal/configmanager/configmanager.go writes it (with the simulation switch).
AMD_WAIT_DRIVER = (
    'while [ ! -d /host-sys/class/kfd ] || [ ! -d /host-sys/module/amdgpu/drivers/ ]; do echo "amdgpu driver is '
    'not loaded "; sleep 2 ;done',
    'if [ "$SIM_ENABLE" = "true" ]; then exit 0; fi; while [ ! -d /host-sys/class/kfd ] || [ ! -d '
    '/host-sys/module/amdgpu/drivers/ ]; do echo "amdgpu driver is not loaded "; sleep 2 ;done',
)
# The waits the operator writes for its other operands (internal/plugin/plugin.go, nodelabeller/nodelabeller.go,
# metricsexporter/metricsexporter.go, testrunner/testrunner.go): for amdgpu at /sys or /host-sys, for the gim
# driver with a VF-passthrough driver type, `true` with PF passthrough; the node labeller first adds or removes
# the operator's amdgpu blacklist file (blacklist-amdgpu-by-operator.conf on OpenShift).
_AMD_WAIT_SYS = (
    'while [ ! -d /sys/class/kfd ] || [ ! -d /sys/module/amdgpu/drivers/ ]; do echo "amdgpu driver is not loaded "; '
    "sleep 2 ;done"
)
_AMD_WAIT_GIM = 'while [ ! -d {sys}/module/gim/drivers/ ]; do echo "gim driver is not loaded "; sleep 2 ;done'
_AMD_SIMULATED = 'if [ "$SIM_ENABLE" = "true" ]; then exit 0; fi; '
_AMD_BLACKLISTS = ("blacklist-amdgpu.conf", "blacklist-amdgpu-by-operator.conf")
AMD_OPERAND_WAITS = (
    *AMD_WAIT_DRIVER,
    _AMD_WAIT_SYS,
    _AMD_WAIT_GIM.format(sys="/sys"),
    _AMD_SIMULATED + _AMD_WAIT_GIM.format(sys="/host-sys"),
    "true",
    *(
        f"{edit}; {wait}"
        for name in _AMD_BLACKLISTS
        for edit in (
            f"rm -f /host-etc/modprobe.d/{name}",
            f'echo "# added by gpu operator \nblacklist amdgpu" > /host-etc/modprobe.d/{name}',
        )
        for wait in (AMD_WAIT_DRIVER[0], _AMD_WAIT_GIM.format(sys="/host-sys"))
    ),
)
# The device plugin and node labeller run from `sh -c`, their flags and labels written after the defaults
# (devicePluginArguments as -key=value, nodeLabellerArguments as -label; the KMM module's plugin waits first).
AMD_DEVICE_PLUGIN = "./k8s-device-plugin -logtostderr=true -stderrthreshold=INFO -v=5 -pulse=30"
AMD_KMM_DEVICE_PLUGIN = (
    _AMD_WAIT_SYS.replace("sleep 2", "sleep 1") + "; ./k8s-device-plugin -logtostderr=true -stderrthreshold=INFO -v=5"
)
AMD_NODE_LABELLER = (
    "./k8s-node-labeller -vram -cu-count -simd-count -device-id -family -product-name -driver-version",
    "./k8s-node-labeller -device-id -driver-version",
    "./k8s-node-labeller -device-id",
)
