"""The read modules on the option groups, in process with the cluster reads stubbed: the new option
names, the earlier names as deprecated aliases that mean the same, fail_on, and api_requests."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from typing import Any

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import DraObjects
from ansible_collections.kubegpu.scheduling.plugins.modules import (
    gpu_cluster_info,
    gpu_device_plugin_validate,
    gpu_fleet_report,
    gpu_host_facts,
    gpu_node_facts,
    gpu_placement_info,
)
from tests.documented_options import spec_drift
from tests.module_args import patch_module_args
from tests.module_deprecations import as_module_process


class Client:
    request_count = 7


def run_module(module: Any, args: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    out = io.StringIO()
    with as_module_process(), patch_module_args(args), redirect_stdout(out), pytest.raises(SystemExit) as exited:
        module.main()
    return exited.value.code, json.loads(out.getvalue())


def deprecated(result: dict[str, Any]) -> list[str]:
    """The names the deprecations of a result speak of (their shape differs between ansible-core 2.18 and 2.19)."""
    return [json.dumps(d) for d in result.get("deprecations", [])]


@pytest.mark.parametrize(
    "module",
    [
        gpu_node_facts,
        gpu_placement_info,
        gpu_device_plugin_validate,
        gpu_cluster_info,
        gpu_host_facts,
        gpu_fleet_report,
    ],
)
def test_the_argument_spec_matches_the_documentation_with_its_fragments(module):
    assert spec_drift(module, module.argument_spec()) == []


# ---------------------------------------------------------------------------------------------
# gpu_node_facts


@pytest.fixture
def fleet_reads(monkeypatch):
    seen: dict[str, Any] = {}

    def read_fleet(client, options, selector, names, page_size, drivers=None):
        seen.update(selector=selector, names=names, page_size=page_size, resources=options.resource_names)
        return [], [], [], DraObjects()

    monkeypatch.setattr(gpu_node_facts, "module_client", lambda module: Client())
    monkeypatch.setattr(gpu_node_facts, "read_fleet", read_fleet)
    return seen


def test_node_facts_join_the_label_selectors_into_one(fleet_reads):
    code, result = run_module(gpu_node_facts, {"label_selectors": ["nvidia.com/gpu.present=true", "pool in (a,b)"]})
    assert code == 0
    assert fleet_reads["selector"] == "nvidia.com/gpu.present=true,pool in (a,b)"
    assert result["ansible_facts"]["gpu_fleet"]["api_requests"] == result["api_requests"] == 7
    assert deprecated(result) == []


def test_node_facts_take_the_earlier_label_selector_as_it_was(fleet_reads):
    code, result = run_module(gpu_node_facts, {"label_selector": "a=b,app in (x,y)"})
    assert code == 0 and fleet_reads["selector"] == "a=b,app in (x,y)"
    assert ["'label_selector' is deprecated" in d for d in deprecated(result)] == [True]


def test_node_facts_without_selectors_select_every_node(fleet_reads):
    code, _result = run_module(gpu_node_facts, {})
    assert code == 0 and fleet_reads["selector"] is None and fleet_reads["page_size"] == 500
    assert fleet_reads["resources"] == ("nvidia.com/gpu",)


def test_node_facts_hold_page_size_to_its_range(fleet_reads):
    code, result = run_module(gpu_node_facts, {"page_size": 0})
    assert code == 1 and result["msg"] == "page_size must be at least 1, not 0"


# ---------------------------------------------------------------------------------------------
# gpu_placement_info


@pytest.fixture
def placement_reads(monkeypatch):
    seen: dict[str, Any] = {}

    def read_placement(client, options, is_gpu, read_dra, page_size, pending=True):
        seen.update(resource=options.resource, is_gpu=is_gpu, page_size=page_size)
        return None, {"resource": options.resource, "nodes": [{"name": "n"}]}

    monkeypatch.setattr(gpu_placement_info, "module_client", lambda module: Client())
    monkeypatch.setattr(gpu_placement_info, "read_placement", read_placement)
    return seen


def test_placement_counts_the_first_resource_name_and_takes_every_one_as_a_gpu(placement_reads):
    code, result = run_module(gpu_placement_info, {"resource_names": ["example.com/gpu", "example.com/vgpu"]})
    assert code == 0 and placement_reads["resource"] == "example.com/gpu"
    assert placement_reads["is_gpu"]("example.com/vgpu") and not placement_reads["is_gpu"]("example.com/tpu")
    assert "nodes" not in result["placement"] and result["placement"]["api_requests"] == 7
    assert result["api_requests"] == 7


def test_placement_takes_the_earlier_resource_and_nodes_as_deprecated_aliases(placement_reads):
    code, result = run_module(gpu_placement_info, {"resource": "example.com/gpu", "nodes": True})
    assert code == 0 and placement_reads["resource"] == "example.com/gpu"
    assert result["placement"]["nodes"] == [{"name": "n"}]
    found = deprecated(result)
    assert len(found) == 2 and any("'resource'" in d for d in found) and any("'nodes'" in d for d in found)
    code, result = run_module(gpu_placement_info, {"per_node": True})
    assert result["placement"]["nodes"] == [{"name": "n"}] and deprecated(result) == []


def test_placement_needs_a_resource_name_and_a_page_size_in_range(placement_reads):
    code, result = run_module(gpu_placement_info, {"resource_names": []})
    assert code == 1 and result["msg"] == "resource_names must name at least one resource"
    code, result = run_module(gpu_placement_info, {"page_size": 0})
    assert code == 1 and result["msg"] == "page_size must be at least 1, not 0"


# ---------------------------------------------------------------------------------------------
# gpu_device_plugin_validate


@pytest.fixture
def plugin_check(monkeypatch):
    seen: dict[str, Any] = {"severities": ["warning"]}

    def evaluate(read, options, host_facts=None, require_hardening=False):
        seen["resources"] = options.resource_names
        findings = [{"severity": s} for s in seen["severities"]]
        healthy = "error" not in seen["severities"]
        return {"healthy": healthy, "findings": findings, "report": ["the report", "in lines"]}

    monkeypatch.setattr(gpu_device_plugin_validate, "module_client", lambda module: Client())
    monkeypatch.setattr(gpu_device_plugin_validate, "read_cluster", lambda client, targets, options: None)
    monkeypatch.setattr(gpu_device_plugin_validate, "evaluate", evaluate)
    return seen


@pytest.mark.parametrize(
    "severities, fail_on, code",
    [
        (["warning"], "error", 0),
        (["warning"], "warning", 1),
        (["info"], "warning", 0),
        (["error", "warning"], "error", 1),
        (["error"], "never", 0),
    ],
)
def test_plugin_check_fails_at_fail_on(plugin_check, severities, fail_on, code):
    plugin_check["severities"] = severities
    exit_code, result = run_module(gpu_device_plugin_validate, {"fail_on": fail_on})
    assert exit_code == code and result["api_requests"] == 7
    if code:
        assert result["msg"] == "the report\nin lines"


def test_plugin_check_report_only_still_means_never_and_is_deprecated(plugin_check):
    plugin_check["severities"] = ["error"]
    code, result = run_module(gpu_device_plugin_validate, {"report_only": True})
    assert code == 0 and result["healthy"] is False
    assert ["report_only" in d for d in deprecated(result)] == [True]
    code, result = run_module(gpu_device_plugin_validate, {"report_only": False})
    assert code == 1


def test_plugin_check_takes_resource_names_and_the_earlier_resource_name(plugin_check):
    code, result = run_module(gpu_device_plugin_validate, {"resource_names": ["example.com/gpu", "nvidia.com/gpu"]})
    assert code == 0 and plugin_check["resources"] == ("example.com/gpu", "nvidia.com/gpu")
    assert deprecated(result) == []
    code, result = run_module(gpu_device_plugin_validate, {"resource_name": "example.com/gpu"})
    assert code == 0 and plugin_check["resources"] == ("example.com/gpu",)
    assert ["'resource_name' is deprecated" in d for d in deprecated(result)] == [True]
