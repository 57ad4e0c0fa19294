"""The test harness's Prometheus: Debian's real Prometheus on 127.0.0.1 scraping simulated DCGM
exporters (tests/cluster/dcgm_exporter.py, tests/cluster/prometheus.py) whose host labels name the
local fleet's GPU nodes. These tests prove what the GPU health tests build on: series per node with
the exporter's labels and the scrape config's `node` label, a changed XID seen by PromQL, a failing
scrape as `up == 0` with its series gone, and the TLS variant's basic auth."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.cluster import fleet as fleet_file
from tests.cluster.dcgm_exporter import (
    EXPORTER_3_3_5_SHAPE,
    HEAD_SHAPE,
    PRESENCE_METRIC,
    RELEASE_LINE,
    XID_METRIC,
    fleet_gpus,
    render_snapshot,
)
from tests.cluster.prometheus import DcgmPrometheus, PrometheusMissing, PrometheusServer

FLEET = fleet_file.load(Path(__file__).resolve().parents[1] / "cluster" / "fleet.yaml")
GPU_NODES = fleet_gpus(FLEET)
# Two GPU nodes of the local fleet: a GPU Operator node and an ACK node.
FIRST, SECOND = "gfd-h100", "ack-v100"
CHANGED_XID = f"changes({XID_METRIC}[1m]) > 0"


def label_names(line: str) -> list[str]:
    return re.findall(r'([A-Za-z_][A-Za-z0-9_]*)="', line.split("{", 1)[1])


def nodes_of(result: list[dict], label: str = "node") -> set[str]:
    return {sample["metric"].get(label) for sample in result}


def test_the_fleet_names_the_gpu_nodes():
    assert GPU_NODES[FIRST] == 8 and GPU_NODES[SECOND] == 4
    assert "cpu" not in GPU_NODES and GPU_NODES["dra-h100"] == 4


def test_a_snapshot_has_the_published_line_shape():
    text = render_snapshot(FIRST, 2, {XID_METRIC: {1: 79}, "DCGM_FI_DEV_ROW_REMAP_FAILURE": 0})
    lines = text.splitlines()
    assert lines[:2] == [
        f"# HELP {PRESENCE_METRIC} GPU temperature (in C).",
        f"# TYPE {PRESENCE_METRIC} gauge",
    ]
    temps = [line for line in lines if line.startswith(PRESENCE_METRIC + "{")]
    assert len(temps) == 2
    assert label_names(temps[0]) == label_names(RELEASE_LINE)
    assert f'Hostname="{FIRST}"' in temps[0] and 'gpu="1"' in temps[1] and 'device="nvidia1"' in temps[1]
    xids = [line for line in lines if line.startswith(XID_METRIC + "{")]
    assert xids[0].endswith('err_code="0",err_msg="No Error"} 0')
    assert xids[1].endswith('err_code="79",err_msg="GPU has fallen off the bus"} 79')
    assert "# TYPE DCGM_FI_DEV_ROW_REMAP_FAILURE gauge" in lines
    # The host label after NVIDIA/dcgm-exporter#655, and a GPU without series.
    head = render_snapshot(FIRST, 2, {PRESENCE_METRIC: {0: None}}, HEAD_SHAPE)
    assert f'hostname="{FIRST}"' in head and "Hostname=" not in head
    assert [line for line in head.splitlines() if line.startswith(PRESENCE_METRIC + "{")][0].startswith(
        f'{PRESENCE_METRIC}{{gpu="1"'
    )


def test_series_of_two_nodes_carry_their_host_and_node_labels(dcgm_prometheus):
    prometheus = dcgm_prometheus.prometheus
    dcgm_prometheus.serve({node: render_snapshot(node, GPU_NODES[node]) for node in (FIRST, SECOND)})

    counts = prometheus.wait_until(f"count by (Hostname, node) ({PRESENCE_METRIC})", lambda r: len(r) == 2)
    assert {(s["metric"]["Hostname"], s["metric"]["node"], s["value"][1]) for s in counts} == {
        (FIRST, FIRST, "8"),
        (SECOND, SECOND, "4"),
    }
    up = prometheus.query('up{job="dcgm-exporter"}')
    assert {(s["metric"]["node"], s["value"][1]) for s in up} == {(FIRST, "1"), (SECOND, "1")}
    sample = prometheus.query(f'{PRESENCE_METRIC}{{node="{FIRST}",gpu="0"}}')[0]["metric"]
    assert {"UUID", "pci_bus_id", "device", "modelName", "DCGM_FI_DRIVER_VERSION", "instance"} <= set(sample)
    assert sample["job"] == "dcgm-exporter"


def test_a_changed_xid_shows_on_that_node_only(dcgm_prometheus):
    """On an exporter whose XID line is one series per GPU (3.3.5 and before), the last-XID gauge
    going from 0 to 79 is a change within the window, on that node only."""
    prometheus = dcgm_prometheus.prometheus
    nodes = (FIRST, SECOND)
    dcgm_prometheus.serve({n: render_snapshot(n, 2, {XID_METRIC: 0}, EXPORTER_3_3_5_SHAPE) for n in nodes})
    prometheus.wait_until(f"count({XID_METRIC})", lambda r: r and r[0]["value"][1] == "4")
    assert prometheus.query(CHANGED_XID) == []

    dcgm_prometheus.exporter.set_node(FIRST, render_snapshot(FIRST, 2, {XID_METRIC: {1: 79}}, EXPORTER_3_3_5_SHAPE))
    changed = prometheus.wait_until(CHANGED_XID)
    assert [(s["metric"]["node"], s["metric"]["Hostname"], s["metric"]["gpu"]) for s in changed] == [
        (FIRST, FIRST, "1")
    ]
    assert prometheus.query(f'{XID_METRIC}{{node="{FIRST}",gpu="1"}}')[0]["value"][1] == "79"


def test_on_exporters_since_3_3_6_a_new_xid_is_a_new_series(dcgm_prometheus):
    """Since release 3.3.6-3.4.2 the XID line carries err_code and err_msg: a new XID is a new series
    and the old one goes stale, so changes() over each series sees nothing; over the series with
    those labels taken away (a subquery) it does."""
    prometheus = dcgm_prometheus.prometheus
    dcgm_prometheus.serve({n: render_snapshot(n, 2) for n in (FIRST, SECOND)})
    prometheus.wait_until(f"count({XID_METRIC})", lambda r: r and r[0]["value"][1] == "4")

    dcgm_prometheus.exporter.set_node(FIRST, render_snapshot(FIRST, 2, {XID_METRIC: {1: 79}}))
    new = prometheus.wait_until(f"{XID_METRIC} == 79")
    assert [(s["metric"]["node"], s["metric"]["err_code"]) for s in new] == [(FIRST, "79")]
    prometheus.wait_scrapes(2)
    assert prometheus.query(CHANGED_XID) == []
    assert prometheus.query(f'{XID_METRIC}{{node="{FIRST}",gpu="1",err_code="0"}}') == []
    merged = f"changes((max without (err_code, err_msg) ({XID_METRIC}))[1m:1s]) > 0"
    assert [(s["metric"]["node"], s["metric"]["gpu"]) for s in prometheus.query(merged)] == [(FIRST, "1")]


def test_a_failing_scrape_is_up_0_and_its_series_go(dcgm_prometheus):
    exporter, prometheus = dcgm_prometheus.exporter, dcgm_prometheus.prometheus
    dcgm_prometheus.serve({n: render_snapshot(n, 2) for n in (FIRST, SECOND)})
    prometheus.wait_until(f"count by (node) ({PRESENCE_METRIC})", lambda r: len(r) == 2)

    exporter.fail_node(SECOND, True)
    down = prometheus.wait_until('up{job="dcgm-exporter"} == 0')
    assert nodes_of(down) == {SECOND}
    # Prometheus marks the failed target's series stale at once: they are gone from instant queries.
    assert nodes_of(prometheus.query(PRESENCE_METRIC)) == {FIRST}
    assert prometheus.query(f'up{{node="{FIRST}"}}')[0]["value"][1] == "1"

    exporter.fail_node(SECOND, False)
    prometheus.wait_until(f'{PRESENCE_METRIC}{{node="{SECOND}"}}', lambda r: len(r) == 2)
    # A node whose exporter is gone (404) is a failing scrape too.
    exporter.remove_node(FIRST)
    assert nodes_of(prometheus.wait_until('up{job="dcgm-exporter"} == 0')) == {FIRST}


def test_each_test_starts_with_no_targets_and_no_series(dcgm_prometheus):
    assert dcgm_prometheus.exporter.nodes() == []
    assert dcgm_prometheus.prometheus.targets() == []
    assert dcgm_prometheus.prometheus.query('{job="dcgm-exporter"}') == []


def test_the_tls_variant_wants_basic_auth_and_answers_with_it(dcgm_prometheus_tls):
    prometheus = dcgm_prometheus_tls.prometheus
    assert dcgm_prometheus_tls.url.startswith("https://127.0.0.1:")
    assert all(p.is_file() for p in (dcgm_prometheus_tls.ca, dcgm_prometheus_tls.client_cert))
    assert dcgm_prometheus_tls.client_key.is_file() and dcgm_prometheus_tls.username
    status, body = prometheus.request("/api/v1/query", params={"query": "up"}, auth=False)
    assert status == 401, body

    dcgm_prometheus_tls.serve({FIRST: render_snapshot(FIRST, 1)})
    status, body = prometheus.request("/api/v1/query", params={"query": PRESENCE_METRIC})
    assert status == 200 and body["status"] == "success"
    assert nodes_of(body["data"]["result"], "Hostname") == {FIRST}


def test_without_prometheus_the_error_names_the_package(tmp_path):
    with pytest.raises(PrometheusMissing, match="Debian's prometheus package"):
        PrometheusServer("127.0.0.1:1", binary=tmp_path / "prometheus").start()


def test_the_harness_starts_and_stops_alone():
    harness = DcgmPrometheus.start()
    try:
        assert harness.prometheus.query("vector(1)")[0]["value"][1] == "1"
        root = harness.prometheus.root
    finally:
        harness.stop()
    assert root is not None and not root.exists()
