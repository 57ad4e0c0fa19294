import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import DEFAULT_OPTIONS, options_from_params
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import gpu_resource_matcher, pod_gpus

SHARING = [
    "aliyun.com/gpu-mem",
    "aliyun.com/gpu-count",
    "aliyun.com/gpu-core.percentage",
    "volcano.sh/gpu-memory",
    "volcano.sh/gpu-number",
    "volcano.sh/vgpu-number",
    "volcano.sh/vgpu-memory",
    "volcano.sh/vgpu-memory-percentage",
    "volcano.sh/vgpu-cores",
    "nvidia.com/gpumem",
    "nvidia.com/gpumem-percentage",
    "nvidia.com/gpucores",
    "nvidia.com/gpu.shared",
    "gpu.intel.com/i915",
    "gpu.intel.com/xe",
    "gpu.intel.com/millicores",
    "gpu.intel.com/memory.max",
]


PASSTHROUGH = ["nvidia.com/pgpu", "nvidia.com/GA102GL_A10", "nvidia.com/GH100_H100_PCIE", "nvidia.com/TU104GL_TESLA_T4"]


@pytest.mark.parametrize(
    "name",
    [*SHARING, *PASSTHROUGH, "nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "amd.com/gpu", "nvidia.com/AD102GL_L40S"],
)
def test_sharing_fraction_and_vendor_resources_are_gpu_requests(name):
    assert gpu_resource_matcher()(name)


@pytest.mark.parametrize(
    "name",
    [
        "cpu",
        "memory",
        "nvidia.com/gpumemory",
        "volcano.sh/gpu-index",
        "gpu.intel.com/tiles2",
        "nvidia.com/nvswitch",
        "nvidia.com/GPUDIRECT",
        "nvidia.com/GA10",
    ],
)
def test_other_resources_are_not(name):
    assert not gpu_resource_matcher()(name)


@pytest.mark.parametrize("name", SHARING)
def test_fleet_counts_only_whole_gpus_never_mib_or_percentages(name):
    assert not DEFAULT_OPTIONS.counts(name)
    assert DEFAULT_OPTIONS.is_gpu(name)
    assert DEFAULT_OPTIONS.counts("nvidia.com/gpu") and DEFAULT_OPTIONS.counts("nvidia.com/mig-1g.10gb")


def test_a_pod_on_shared_gpus_holds_its_sharing_resources_by_name_not_as_gpu_counts():
    spec = {"containers": [{"resources": {"limits": {"volcano.sh/gpu-memory": 1024, "cpu": 2}}}]}
    assert pod_gpus(spec, DEFAULT_OPTIONS.is_gpu) == {"volcano.sh/gpu-memory": 1024}
    assert not any(DEFAULT_OPTIONS.counts(name) for name in pod_gpus(spec, DEFAULT_OPTIONS.is_gpu))


def test_configured_resource_names_add_to_the_defaults():
    options = options_from_params(resource_names=["example.com/accel"])
    assert options.is_gpu("example.com/accel") and options.is_gpu("volcano.sh/gpu-memory")
    assert options.counts("example.com/accel") and not options.counts("volcano.sh/gpu-memory")
