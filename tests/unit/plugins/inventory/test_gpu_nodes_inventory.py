"""The gpu_nodes inventory plugin's pure parts and the node's host-finding facts, on nodes as EKS, GCE and
kubeadm publish them (tests/unit/fixtures/nodes/README.md names the sources); the plugin itself through
ansible-doc and ansible-inventory, with clusters that cannot be read."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml

from ansible_collections.kubegpu.scheduling.plugins.inventory.gpu_nodes import (
    ALL_GPU_NODES_GROUP,
    cluster_entries,
    group_name,
    host_groups,
    host_vars,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.facts import summarise
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.nodes import (
    ADDRESS_TYPES,
    location_facts,
    preferred_address,
    project_node,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nodes"
BIN = Path(sys.executable).parent
DEFAULT_PREFERENCE = list(ADDRESS_TYPES)


def load(name: str) -> dict:
    text = (FIXTURES / name).read_text()
    return json.loads(text) if name.endswith(".json") else yaml.safe_load(text)


def eks() -> dict:
    return load("eks-ip-10-0-105-29.json")


def gce() -> dict:
    return load("gce-kubernetes-node-861h.yaml")


def kubeadm() -> dict:
    return load("kubeadm-kube-worker-1.yaml")


def with_gpus(node: dict, gpus: int, product: str | None = None) -> dict:
    """The published node with GPU capacity added (and a GPU Feature Discovery model label)."""
    node = copy.deepcopy(node)
    for field in ("capacity", "allocatable"):
        node["status"].setdefault(field, {})["nvidia.com/gpu"] = str(gpus)
    if product:
        node["metadata"]["labels"]["nvidia.com/gpu.product"] = product
    return node


def node_facts(node: dict) -> dict:
    (facts,) = summarise([project_node(node)], [], [])["nodes"]
    return facts


# --- the node's host-finding facts --------------------------------------------------------------------


def test_eks_node_falls_back_to_the_deprecated_zone_region_and_instance_type_labels():
    assert location_facts(project_node(eks())) == {
        "addresses": [
            {"type": "InternalIP", "address": "10.0.105.29"},
            {"type": "ExternalIP", "address": "3.139.58.222"},
            {"type": "Hostname", "address": "ip-10-0-105-29.us-east-2.compute.internal"},
        ],
        "provider_id": "aws:///us-east-2c/i-0a99d3bb7b27d62ac",
        "zone": "us-east-2c",
        "region": "us-east-2",
        "instance_type": "t2.large",
    }


def test_the_current_topology_and_instance_type_labels_win_over_the_deprecated_ones():
    node = eks()
    node["metadata"]["labels"].update(
        {
            "topology.kubernetes.io/zone": "us-east-2a",
            "topology.kubernetes.io/region": "us-east-1",
            "node.kubernetes.io/instance-type": "p4d.24xlarge",
        }
    )
    facts = location_facts(project_node(node))
    assert (facts["zone"], facts["region"], facts["instance_type"]) == ("us-east-2a", "us-east-1", "p4d.24xlarge")


def test_gce_node_without_topology_labels_or_hostname_address():
    facts = location_facts(project_node(gce()))
    assert facts["provider_id"] == "gce://striped-torus-760/us-central1-b/kubernetes-node-861h"
    assert facts["addresses"] == [
        {"type": "InternalIP", "address": "10.240.115.55"},
        {"type": "ExternalIP", "address": "104.197.0.26"},
    ]
    assert (facts["zone"], facts["region"], facts["instance_type"]) == (None, None, None)


def test_kubeadm_node_without_a_cloud_has_no_provider_id():
    facts = location_facts(project_node(kubeadm()))
    assert facts["provider_id"] is None
    assert [a["type"] for a in facts["addresses"]] == ["InternalIP", "Hostname"]


def test_malformed_addresses_and_provider_id_are_dropped():
    node = kubeadm()
    node["spec"] = {"providerID": 7}
    node["status"]["addresses"] = ["x", {"type": "InternalIP"}, {"type": "InternalIP", "address": ""}, {"address": "a"}]
    assert location_facts(project_node(node)) == {
        "addresses": [],
        "provider_id": None,
        "zone": None,
        "region": None,
        "instance_type": None,
    }


def test_gpu_node_facts_carry_the_location_and_non_gpu_nodes_are_left_out():
    assert summarise([project_node(eks())], [], [])["nodes"] == []
    facts = node_facts(with_gpus(eks(), 8))
    assert facts["provider_id"] == "aws:///us-east-2c/i-0a99d3bb7b27d62ac"
    assert facts["zone"] == "us-east-2c" and facts["instance_type"] == "t2.large"
    assert facts["addresses"][0] == {"type": "InternalIP", "address": "10.0.105.29"}


# --- address preference ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("node", "preference", "expected"),
    [
        (eks, DEFAULT_PREFERENCE, "10.0.105.29"),
        (eks, ["ExternalIP", "InternalIP"], "3.139.58.222"),
        (eks, ["Hostname"], "ip-10-0-105-29.us-east-2.compute.internal"),
        (gce, ["Hostname", "ExternalIP"], "104.197.0.26"),
        (gce, ["Hostname"], None),
        (kubeadm, ["ExternalIP", "Hostname", "InternalIP"], "kube-worker-1"),
    ],
)
def test_preferred_address(node, preference, expected):
    assert preferred_address(location_facts(project_node(node()))["addresses"], preference) == expected


# --- host variables and groups -------------------------------------------------------------------------


def test_host_vars_of_an_eks_gpu_node_are_its_facts():
    facts = node_facts(with_gpus(eks(), 8, "NVIDIA-A100-SXM4-80GB"))
    variables = host_vars(facts, "prod-us-east-2", ["ExternalIP", "InternalIP"])
    assert variables == {
        "ansible_host": "3.139.58.222",
        "kubegpu_cluster": "prod-us-east-2",
        "kubegpu_node": "ip-10-0-105-29.us-east-2.compute.internal",
        "kubegpu_model": "NVIDIA-A100-SXM4-80GB",
        "kubegpu_capacity": 8,
        "kubegpu_allocatable": 8,
        "kubegpu_allocated": 0,
        "kubegpu_free": 8,
        "kubegpu_gpu_sources": ["device_plugin"],
        "kubegpu_problems": ["no_device_plugin_pod"],
        "kubegpu_addresses": facts["addresses"],
        "kubegpu_provider_id": "aws:///us-east-2c/i-0a99d3bb7b27d62ac",
        "kubegpu_zone": "us-east-2c",
        "kubegpu_region": "us-east-2",
        "kubegpu_instance_type": "t2.large",
    }
    assert host_groups(variables) == [
        ALL_GPU_NODES_GROUP,
        "kubegpu_model_nvidia_a100_sxm4_80gb",
        "kubegpu_cluster_prod_us_east_2",
        "kubegpu_problem_no_device_plugin_pod",
    ]


def test_a_node_with_no_address_of_the_preferred_types_gets_no_ansible_host():
    variables = host_vars(node_facts(with_gpus(gce(), 1)), "gce", ["Hostname"])
    assert "ansible_host" not in variables
    assert variables["kubegpu_model"] is None
    assert "kubegpu_model_unknown" in host_groups(variables)


@pytest.mark.parametrize(
    ("prefix", "value", "expected"),
    [
        ("kubegpu_model", "NVIDIA-H100-80GB-HBM3", "kubegpu_model_nvidia_h100_80gb_hbm3"),
        ("kubegpu_model", "NVIDIA-A100-SXM4-80GB-MIG-3g.40gb", "kubegpu_model_nvidia_a100_sxm4_80gb_mig_3g_40gb"),
        ("kubegpu_model", "Tesla V100 (SXM2)", "kubegpu_model_tesla_v100_sxm2"),
        (
            "kubegpu_cluster",
            "arn:aws:eks:us-east-2:1234:cluster/prod",
            "kubegpu_cluster_arn_aws_eks_us_east_2_1234_cluster_prod",
        ),
        ("kubegpu_cluster", "---", "kubegpu_cluster__"),
    ],
)
def test_group_names_are_sanitised(prefix, value, expected):
    assert group_name(prefix, value) == expected


# --- clusters ------------------------------------------------------------------------------------------


def test_no_clusters_is_one_default_cluster_with_the_top_level_options():
    assert cluster_entries([], {"kubeconfig": "/k", "context": None}) == [
        ("default", {"kubeconfig": "/k", "context": None})
    ]


def test_cluster_entries_override_the_top_level_options_and_are_named_by_their_context():
    defaults = {"kubeconfig": "/k", "context": None, "validate_certs": None}
    entries = [{"name": "a", "context": "ctx-a"}, {"context": "ctx-b", "verify_ssl": False}]
    assert cluster_entries(entries, defaults) == [
        ("a", {"kubeconfig": "/k", "context": "ctx-a", "validate_certs": None}),
        ("ctx-b", {"kubeconfig": "/k", "context": "ctx-b", "validate_certs": None, "verify_ssl": False}),
    ]


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ([{"name": "a", "kubeconfg": "/k"}], "clusters[0]: unknown option(s) kubeconfg"),
        ([{"name": "a"}, {"name": "a"}], 'clusters[1]: the name "a" is taken'),
        ([{}, {}], 'clusters[1]: the name "default" is taken'),
        (["a"], "clusters[0] must be a dictionary"),
        ({"name": "a"}, "clusters must be a list"),
        ([{"name": 5}], "clusters[0].name must be a string"),
    ],
)
def test_bad_cluster_entries_are_named(entries, message):
    with pytest.raises(OptionError, match=None) as caught:
        cluster_entries(entries, {})
    assert message in caught.value.message


# --- the plugin through ansible ------------------------------------------------------------------------


def ansible_env() -> dict[str, str]:
    collections = sysconfig.get_paths()["purelib"]
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections, ANSIBLE_NOCOLOR="1")
    for name in [n for n in env if n.startswith("K8S_AUTH_") or n == "KUBECONFIG"]:
        env.pop(name)
    return env


def test_ansible_doc_renders_the_plugin(tmp_path):
    doc = subprocess.run(
        [str(BIN / "ansible-doc"), "-t", "inventory", "kubegpu.scheduling.gpu_nodes"],
        env=ansible_env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert doc.returncode == 0, doc.stderr
    for text in ("address_preference", "keyed_groups", "cache_plugin", "kubeconfig", "EXAMPLES", "kubegpu_gpu_nodes"):
        assert text in doc.stdout, text


def run_inventory(tmp_path: Path, source: dict, name: str = "fleet.kubegpu.yml") -> subprocess.CompletedProcess:
    """ansible-inventory --graph on one source, failing when the source cannot be parsed."""
    path = tmp_path / name
    path.write_text(yaml.safe_dump(source))
    return subprocess.run(
        [str(BIN / "ansible-inventory"), "-i", str(path), "--graph"],
        env=dict(ansible_env(), ANSIBLE_INVENTORY_UNPARSED_FAILED="true"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def unreadable_clusters(tmp_path: Path) -> list[dict]:
    return [
        {"name": "east", "kubeconfig": str(tmp_path / "missing-east.yaml")},
        {"name": "west", "kubeconfig": str(tmp_path / "missing-west.yaml")},
    ]


def test_an_unreadable_cluster_is_a_warning_naming_it_and_the_others_are_still_read(tmp_path):
    done = run_inventory(
        tmp_path, {"plugin": "kubegpu.scheduling.gpu_nodes", "clusters": unreadable_clusters(tmp_path)}
    )
    assert done.returncode == 0, done.stderr
    output = " ".join((done.stdout + done.stderr).split())
    assert 'cluster "east" cannot be read' in output and 'cluster "west" cannot be read' in output
    assert "missing-west.yaml" in output and "its GPU nodes are left out" in output
    assert "Traceback" not in output


def test_an_unreadable_cluster_is_an_error_naming_it_with_strict(tmp_path):
    source = {"plugin": "kubegpu.scheduling.gpu_nodes", "strict": True, "clusters": unreadable_clusters(tmp_path)}
    done = run_inventory(tmp_path, source)
    output = " ".join((done.stdout + done.stderr).split())
    assert done.returncode != 0
    assert 'cluster "east" cannot be read: kubeconfig file not found' in output
    assert 'cluster "west"' not in output, "strict stops at the first cluster that cannot be read"
    assert "Traceback" not in output


def test_a_file_not_named_kubegpu_yml_is_not_a_source(tmp_path):
    source = {"plugin": "kubegpu.scheduling.gpu_nodes", "clusters": unreadable_clusters(tmp_path)}
    done = run_inventory(tmp_path, source, name="fleet.yml")
    output = " ".join((done.stdout + done.stderr).split())
    assert done.returncode != 0, "no plugin takes the file"
    assert "cannot be read" not in output
