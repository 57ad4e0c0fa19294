"""The rendered objects: NVIDIA's DaemonSet with the deployment's options, the config mounted as
the plugin's --config-file, the collection's mark, and options refused with their name."""

from __future__ import annotations

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.managed import MANAGED_BY, is_managed
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.placement import placement_mismatches
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_deploy.manifests import (
    CONFIG_DIGEST_ANNOTATION,
    build_deploy_options,
    plugin_placement,
    removable_objects,
    rendered_objects,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.owned import (
    RENDERED_DIGEST_ANNOTATION,
    object_key,
)

TIME_SLICED = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n"


def pod_spec(obj: dict) -> dict:
    return obj["spec"]["template"]["spec"]


def test_defaults_render_the_published_daemonset_marked_as_ours():
    (daemonset,) = rendered_objects(build_deploy_options(version="v0.17.4"))
    assert daemonset["metadata"]["namespace"] == "kube-system"
    assert is_managed(daemonset) and daemonset["spec"]["template"]["metadata"]["labels"] == {
        "name": "nvidia-device-plugin-ds",
        **MANAGED_BY,
    }
    assert daemonset["spec"]["selector"] == {"matchLabels": {"name": "nvidia-device-plugin-ds"}}
    spec = pod_spec(daemonset)
    assert spec["containers"][0]["image"] == "nvcr.io/nvidia/k8s-device-plugin:v0.17.4"
    assert spec["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert spec["priorityClassName"] == "system-node-critical"
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert daemonset["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}


def test_the_plugin_stays_off_dra_nodes_and_runs_where_the_label_says():
    options = build_deploy_options(node_selector={"example.com/gpu-pool": "a"})
    placement = plugin_placement(options)
    pool = {"example.com/gpu-pool": "a"}
    assert not placement_mismatches({"labels": pool, "taints": []}, placement)
    dra = {**pool, "nvidia.com/dra-kubelet-plugin": "true"}
    assert placement_mismatches({"labels": dra, "taints": []}, placement)
    assert placement_mismatches({"labels": {"nvidia.com/gpu.present": "true"}, "taints": []}, placement)
    tainted = {"labels": pool, "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}
    assert not placement_mismatches(tainted, placement)


def test_feature_discovery_keeps_its_terms_each_with_the_dra_exclusion():
    objects = rendered_objects(build_deploy_options(feature_discovery=True, namespace="gpu"))
    gfd = objects[-1]
    assert gfd["metadata"]["name"] == "gpu-feature-discovery" and gfd["metadata"]["namespace"] == "gpu"
    terms = pod_spec(gfd)["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert len(terms["nodeSelectorTerms"]) == 3
    for term in terms["nodeSelectorTerms"]:
        assert term["matchExpressions"][-1] == {
            "key": "nvidia.com/dra-kubelet-plugin",
            "operator": "NotIn",
            "values": ["true"],
        }


def test_a_config_is_a_config_map_mounted_as_the_config_file_and_rolls_the_pods_when_it_changes():
    config_map, daemonset = rendered_objects(build_deploy_options(config=TIME_SLICED))
    assert config_map["kind"] == "ConfigMap" and config_map["data"] == {"config.yaml": TIME_SLICED}
    container = pod_spec(daemonset)["containers"][0]
    assert {"name": "CONFIG_FILE", "value": "/etc/nvidia-device-plugin/config.yaml"} in container["env"]
    assert {"name": "device-plugin-config", "mountPath": "/etc/nvidia-device-plugin", "readOnly": True} in container[
        "volumeMounts"
    ]
    assert {"name": "device-plugin-config", "configMap": {"name": "nvidia-device-plugin-config"}} in pod_spec(
        daemonset
    )["volumes"]
    other = rendered_objects(build_deploy_options(config=TIME_SLICED.replace("4", "2")))[1]
    annotations = daemonset["spec"]["template"]["metadata"]["annotations"]
    assert (
        annotations[CONFIG_DIGEST_ANNOTATION]
        != other["spec"]["template"]["metadata"]["annotations"][CONFIG_DIGEST_ANNOTATION]
    )


def test_the_rendered_digest_changes_with_any_option():
    first = rendered_objects(build_deploy_options())[0]["metadata"]["annotations"][RENDERED_DIGEST_ANNOTATION]
    again = rendered_objects(build_deploy_options())[0]["metadata"]["annotations"][RENDERED_DIGEST_ANNOTATION]
    without_priority = rendered_objects(build_deploy_options(priority_class=""))[0]
    assert first == again
    assert "priorityClassName" not in pod_spec(without_priority)
    assert without_priority["metadata"]["annotations"][RENDERED_DIGEST_ANNOTATION] != first


def test_percent_and_number_of_unavailable_nodes():
    assert build_deploy_options(max_unavailable="25%").max_unavailable == "25%"
    assert build_deploy_options(max_unavailable="3").max_unavailable == 3


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"version": "v0.16.0"}, "version"),
        ({"namespace": "Kube_System"}, "namespace"),
        ({"node_selector": {"bad key/x/y": "true"}}, "node_selector"),
        ({"node_selector": {"pool": "not a value"}}, "node_selector"),
        ({"node_selector": {}}, "node_selector"),
        ({"dra_node_label": "/dra"}, "dra_node_label"),
        ({"priority_class": "Critical"}, "priority_class"),
        ({"max_unavailable": 0}, "max_unavailable"),
        ({"max_unavailable": "150%"}, "max_unavailable"),
    ],
)
def test_bad_options_are_refused_with_their_name(options, named):
    with pytest.raises(OptionError, match=named):
        build_deploy_options(**options)


def test_absent_knows_every_object_present_may_make():
    keys = [object_key(o) for o in removable_objects("gpu")]
    assert keys == [
        "DaemonSet gpu/nvidia-device-plugin-daemonset",
        "DaemonSet gpu/gpu-feature-discovery",
        "ConfigMap gpu/nvidia-device-plugin-config",
    ]
    made = rendered_objects(build_deploy_options(namespace="gpu", config=TIME_SLICED, feature_discovery=True))
    assert {object_key(o) for o in made} == set(keys)
