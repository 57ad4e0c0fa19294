import copy

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.projection import (
    ROLE_EXEMPT,
    ROLE_WORKLOAD,
    pod_role,
    project_pod,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.components import (
    BUILTIN_CATALOGUE,
    BUILTIN_COMPONENTS,
    NO_CATALOGUE,
    catalogue_from_option,
    image_repository,
    repository_tails,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import DEFAULT_OPTIONS, options_from_params
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError

# NVIDIA's static device-plugin DaemonSet (deployments/static/nvidia-device-plugin.yml), its pod spec.
PLUGIN = {"containers": [{"name": "nvidia-device-plugin-ctr", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"}]}
# GPU Operator's node status exporter (assets/state-node-status-exporter/0700_daemonset.yaml).
STATUS_EXPORTER = {
    "containers": [
        {
            "name": "nvidia-node-status-exporter",
            "image": "nvcr.io/nvidia/gpu-operator:v25.10.0",
            "command": ["nvidia-validator"],
            "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}],
        }
    ]
}


def with_container(spec, **changes):
    """The spec with its one container changed; a change to None removes the key."""
    container = {**spec["containers"][0], **changes}
    return {**spec, "containers": [{k: v for k, v in container.items() if v is not None}]}


@pytest.mark.parametrize(
    "image, repository",
    [
        ("nvcr.io/nvidia/k8s-device-plugin:v0.20.0", "nvcr.io/nvidia/k8s-device-plugin"),
        ("gcr.io/gke-release/nri-device-injector@sha256:6e79", "gcr.io/gke-release/nri-device-injector"),
        ("localhost:5000/nvidia/k8s-device-plugin", "localhost:5000/nvidia/k8s-device-plugin"),
        ("Registry.Example.com/NVIDIA/Driver:595", "registry.example.com/nvidia/driver"),
    ],
)
def test_image_repository_drops_tag_and_digest_not_the_registry_port(image, repository):
    assert image_repository(image) == repository


def test_repository_tails_run_from_the_whole_path_to_the_last_part():
    assert repository_tails("a.io/b/c:1") == ["a.io/b/c", "b/c", "c"]


@pytest.mark.parametrize(
    "image",
    [
        "nvcr.io/nvidia/k8s-device-plugin:v0.17.0",
        "nvidia/k8s-device-plugin:v0.20.0",
        "harbor.example.com/mirror/nvidia/k8s-device-plugin:v0.20.0",
        "nvcr.io/nvidia/k8s-device-plugin@sha256:0123456789abcdef",
        # ACK's registry in a region, over its VPC endpoint.
        "registry-vpc.cn-hangzhou.aliyuncs.com/acs/k8s-device-plugin:v0.9.0-a5e4f5a-aliyun",
    ],
)
def test_the_device_plugin_is_recognised_from_any_mirror(image):
    assert BUILTIN_CATALOGUE.recognise(with_container(PLUGIN, image=image)).name == "NVIDIA device plugin"


@pytest.mark.parametrize(
    "image",
    [
        "registry.example.com/k8s-device-plugin-fork:v1",
        "registry.example.com/team/trainer:1",
        "nvcr.io/nvidia/k8s-device-plugin-extra:v1",
        "docker.io/library/python:3.12",
    ],
)
def test_an_image_of_another_repository_is_not_recognised(image):
    assert BUILTIN_CATALOGUE.recognise(with_container(PLUGIN, image=image)) is None


@pytest.mark.parametrize(
    "command, args",
    [
        (["python", "train.py"], None),
        (["sh", "-c"], ["nvidia-device-plugin; python train.py"]),
        (["bash"], None),
        (["nvidia-device-plugin-evil"], None),
        ("nvidia-device-plugin", None),  # not a list: never the component's
    ],
)
def test_the_component_image_with_a_user_command_is_not_recognised(command, args):
    assert BUILTIN_CATALOGUE.recognise(with_container(PLUGIN, command=command, args=args)) is None


@pytest.mark.parametrize(
    "command, args",
    [
        (None, None),
        (["nvidia-device-plugin"], None),
        (["nvidia-device-plugin"], ["--fail-on-init-error=false"]),
        (None, ["--mig-strategy=single"]),  # flags to the image's entrypoint, nvidia-device-plugin
    ],
)
def test_the_published_command_lines_are_recognised(command, args):
    assert (
        BUILTIN_CATALOGUE.recognise(with_container(PLUGIN, command=command, args=args)).name == "NVIDIA device plugin"
    )


def test_args_without_a_command_count_only_where_the_entrypoint_is_the_components_binary():
    # The validator image's shell scripts are exact; args alone are not its flags.
    spec = with_container(STATUS_EXPORTER, command=None, args=["python", "train.py"])
    assert BUILTIN_CATALOGUE.recognise(STATUS_EXPORTER).name == "NVIDIA GPU Operator node status exporter"
    assert BUILTIN_CATALOGUE.recognise(spec) is None


def test_every_container_must_be_the_components_own():
    sidecar = {"name": "agent", "image": "registry.example.com/agent:1"}
    spec = copy.deepcopy(PLUGIN)
    spec["containers"].append(sidecar)
    assert BUILTIN_CATALOGUE.recognise(spec) is None
    spec = copy.deepcopy(PLUGIN)
    spec["initContainers"] = [sidecar]
    assert BUILTIN_CATALOGUE.recognise(spec) is None


def test_an_ephemeral_debug_container_ends_the_recognition():
    spec = copy.deepcopy(PLUGIN)
    spec["ephemeralContainers"] = [{"name": "debugger", "image": "busybox", "command": ["sh"]}]
    assert BUILTIN_CATALOGUE.recognise(spec) is None


def test_a_helper_image_alone_is_not_a_component():
    # GKE's driver installer ships a pause container; a pod of pause alone is not the installer, and the
    # validator image that waits in the operands' init containers is not the device plugin on its own.
    assert BUILTIN_CATALOGUE.recognise({"containers": [{"name": "pause", "image": "gke.gcr.io/pause:3.8"}]}) is None
    waiting = {
        "name": "toolkit-validation",
        "image": "nvcr.io/nvidia/gpu-operator:v25.10.0",
        "command": ["sh", "-c"],
        "args": [
            "until [ -f /run/nvidia/validations/toolkit-ready ]; do echo waiting for nvidia container stack to be "
            "setup; sleep 5; done"
        ],
    }
    assert BUILTIN_CATALOGUE.recognise({"containers": [waiting]}) is None
    assert BUILTIN_CATALOGUE.recognise({**PLUGIN, "initContainers": [waiting]}).name == "NVIDIA device plugin"


def test_a_spec_without_containers_is_not_recognised():
    assert BUILTIN_CATALOGUE.recognise({}) is None
    assert BUILTIN_CATALOGUE.recognise({"containers": "x"}) is None
    assert BUILTIN_CATALOGUE.recognise({"containers": [{"name": "no-image"}]}) is None


def test_names_are_unique_and_every_component_has_images_namespaces_and_a_source():
    names = [c.name for c in BUILTIN_COMPONENTS]
    assert len(names) == len(set(names))
    for component in BUILTIN_COMPONENTS:
        assert component.images and component.namespaces and component.source, component.name
        assert all(image == image_repository(image) for image in component.images), component.name


def test_the_option_extends_and_switches_off_the_catalogue():
    extra = {"name": "Acme GPU agent", "images": ["acme/gpu-agent:2"], "commands": [["/agent", "..."]]}
    agent = {
        "containers": [{"name": "a", "image": "registry.example.com/acme/gpu-agent:3", "command": ["/agent", "-v"]}]
    }
    assert BUILTIN_CATALOGUE.recognise(agent) is None
    assert catalogue_from_option({"extra": [extra]}).recognise(agent).name == "Acme GPU agent"
    assert catalogue_from_option({"extra": [extra]}).recognise(PLUGIN).name == "NVIDIA device plugin"
    only_extra = catalogue_from_option({"builtin": False, "extra": [extra]})
    assert only_extra.recognise(PLUGIN) is None
    assert only_extra.recognise(agent).name == "Acme GPU agent"
    assert catalogue_from_option({"builtin": False, "extra": []}).recognise(PLUGIN) is None
    assert catalogue_from_option(None) is BUILTIN_CATALOGUE
    assert catalogue_from_option({"builtin": True, "extra": []}) is BUILTIN_CATALOGUE


@pytest.mark.parametrize(
    "value, message",
    [
        ("yes", "system_components must be a dictionary"),
        ({"builtin": "no"}, "system_components.builtin must be true or false"),
        ({"include": []}, "system_components: unknown key(s) include"),
        ({"extra": {"name": "x"}}, "system_components.extra must be a list"),
        ({"extra": ["agent"]}, "system_components.extra[0] must be a dictionary"),
        ({"extra": [{"images": ["a/b"]}]}, "system_components.extra[0].name must be a non-empty string"),
        ({"extra": [{"name": "Agent"}]}, "system_components.extra[0] (Agent): images is required"),
        ({"extra": [{"name": "Agent", "images": [""]}]}, "system_components.extra[0] (Agent).images must be"),
        (
            {"extra": [{"name": "Agent", "images": ["a/b"], "commands": ["/agent --all"]}]},
            "system_components.extra[0] (Agent).commands[0] must be a non-empty list of strings",
        ),
        (
            {"extra": [{"name": "Agent", "images": ["a/b"], "commands": [["/agent", 1]]}]},
            "system_components.extra[0] (Agent).commands[0] must hold only strings",
        ),
        (
            {"extra": [{"name": "Agent", "images": ["a/b"], "image": "a/b"}]},
            "system_components.extra[0]: unknown key(s) image",
        ),
        (
            {"extra": [{"name": "Agent", "images": ["a/b"], "entrypoint_args": "yes"}]},
            "system_components.extra[0] (Agent).entrypoint_args must be true or false",
        ),
    ],
)
def test_bad_option_values_name_the_option_and_the_entry(value, message):
    with pytest.raises(OptionError) as raised:
        catalogue_from_option(value)
    assert message in str(raised.value)


# --- the fleet facts ------------------------------------------------------------------------------


def bound_pod(spec, labels=None, namespace="gpu-operator"):
    return {
        "metadata": {"name": "p", "namespace": namespace, "labels": labels or {}},
        "spec": {**copy.deepcopy(spec), "nodeName": "n1"},
        "status": {"phase": "Running"},
    }


def test_a_component_setting_visible_devices_is_exempt_in_the_fleet_facts_whatever_its_labels():
    exporter = with_container(STATUS_EXPORTER, env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])
    assert pod_role("gpu-operator", {}, DEFAULT_OPTIONS, exporter) == ROLE_EXEMPT
    assert project_pod(bound_pod(exporter)) is None
    # Switched off, the same pod is shadow GPU use.
    options = options_from_params(system_components={"builtin": False})
    assert options.components is not BUILTIN_CATALOGUE and not options.components
    assert project_pod(bound_pod(exporter), options)["bypass"] == [
        "container nvidia-node-status-exporter: NVIDIA_VISIBLE_DEVICES=all"
    ]


def test_a_workload_borrowing_a_components_labels_and_namespace_is_still_shadow_gpu_use():
    impostor = {
        "containers": [
            {
                "name": "nvidia-node-status-exporter",
                "image": "registry.example.com/team/trainer:1",
                "command": ["python", "train.py"],
                "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}],
            }
        ]
    }
    labels = {"app": "nvidia-node-status-exporter"}
    assert pod_role("gpu-operator", labels, DEFAULT_OPTIONS, impostor) == ROLE_WORKLOAD
    assert project_pod(bound_pod(impostor, labels))["bypass"]


def test_the_label_selectors_still_exempt_without_a_spec():
    assert pod_role("gpu-operator", {"app": "nvidia-dcgm-exporter"}, DEFAULT_OPTIONS) == ROLE_EXEMPT
    assert NO_CATALOGUE.recognise(PLUGIN) is None


# The device plugin container of the KMM module the AMD GPU Operator writes (internal/kmmmodule/kmmmodule.go).
AMD_KMM_PLUGIN = {
    "containers": [
        {
            "name": "device-plugin",
            "image": "rocm/k8s-device-plugin:latest",
            "command": ["sh"],
            "args": [
                "-c",
                'while [ ! -d /sys/class/kfd ] || [ ! -d /sys/module/amdgpu/drivers/ ]; do echo "amdgpu driver is not '
                'loaded "; sleep 1 ;done; ./k8s-device-plugin -logtostderr=true -stderrthreshold=INFO -v=5',
            ],
        }
    ]
}


def test_the_amd_kmm_modules_device_plugin_is_recognised_and_its_script_is_exact():
    assert BUILTIN_CATALOGUE.recognise(AMD_KMM_PLUGIN).name == "AMD GPU Operator device plugin"
    longer = with_container(AMD_KMM_PLUGIN, args=["-c", AMD_KMM_PLUGIN["containers"][0]["args"][1] + " -pulse=30"])
    assert BUILTIN_CATALOGUE.recognise(longer) is None


@pytest.mark.parametrize(
    "script, recognised",
    [
        ("", True),
        (" -resource_naming_strategy=mixed", True),
        (" -resource_naming_strategy=mixed -driver_type=container", True),
        (" -resource_naming_strategy=mixed; id", False),
        (" -x=`id`", False),
        ("-glued", False),
        (" resource_naming_strategy=mixed", False),
    ],
)
def test_an_amd_device_plugin_takes_flags_after_its_defaults_and_nothing_else(script, recognised):
    base = "./k8s-device-plugin -logtostderr=true -stderrthreshold=INFO -v=5 -pulse=30"
    spec = {
        "containers": [
            {"name": "device-plugin", "image": "rocm/k8s-device-plugin", "command": ["sh", "-c", base + script]}
        ]
    }
    assert (BUILTIN_CATALOGUE.recognise(spec) is not None) == recognised
