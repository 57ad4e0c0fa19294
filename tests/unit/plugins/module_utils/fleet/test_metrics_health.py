"""The health view's judgement of the DCGM exporter's metrics: the option, the fixed queries, and
the mapping of query answers (as Prometheus's HTTP API returns them) onto the GPU nodes. The
label sets of the series are those of published exporter output (tests/unit/fixtures/dcgm/)."""

from __future__ import annotations

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.facts import summarise
from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.metrics_health import (
    by_node,
    node_metrics_health,
    node_of,
    not_collected,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.prometheus_reads import (
    Q_AGE,
    Q_COLLECTED,
    Q_DOWN,
    Q_GPUS,
    Q_SIGNALS,
    QUERY_NAMES,
    MetricsRead,
    PrometheusSource,
    not_recorded,
    prometheus_source,
    queries,
    requests_at,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dcgm_promql import SIGNAL_LABEL
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dcgm_signals import (
    METRIC_SIGNALS,
    PRESENCE_METRIC,
    WATCHED_METRICS,
    XID_COUNT_SIGNAL,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.nodes import project_node
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import DEFAULT_OPTIONS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from tests.dcgm_fixtures import series as published
from tests.unit.plugins.module_utils.fleet.test_facts import make_node

SOURCE = PrometheusSource(url="http://127.0.0.1:9090", window="10m", stale_after=120)
NOW = 1764928800.0


def exporter_labels(fixture: str = "lke-rtx4000-pod-mapping") -> dict[str, str]:
    """The labels of the first GPU series of a published exporter output."""
    return next(dict(labels) for metric, labels, _value in published(fixture) if metric == PRESENCE_METRIC)


def gpu_labels(node: str, gpu: int, host_label: str = "Hostname") -> dict[str, str]:
    labels = {k: v for k, v in exporter_labels().items() if k != "Hostname"}
    return {**labels, host_label: node, "gpu": str(gpu), "UUID": f"GPU-{node}-{gpu}"}


def signal(metric: str, node: str, gpu: int, value: float, **extra: str) -> dict:
    return {"metric": {**gpu_labels(node, gpu), SIGNAL_LABEL: metric, **extra}, "value": value}


def read(signals=(), gpus=None, ages=None, down=(), collected=WATCHED_METRICS, error=None, source=SOURCE):
    gpus = gpus if gpus is not None else {"gpu-a": 8}
    ages = ages if ages is not None else {name: 3.0 for name in gpus}
    return MetricsRead(
        source,
        NOW,
        series={
            Q_SIGNALS: list(signals),
            Q_GPUS: [{"metric": {"Hostname": n}, "value": float(c)} for n, c in gpus.items()],
            Q_AGE: [{"metric": {"Hostname": n}, "value": a} for n, a in ages.items()],
            Q_COLLECTED: [{"metric": {"__name__": m}, "value": 1.0} for m in collected],
            Q_DOWN: [
                {"metric": {"job": "dcgm-exporter", "instance": "127.0.0.1:9400", "node": n}, "value": 0.0}
                for n in down
            ],
        },
        error=error,
    )


def judge(metrics: MetricsRead, node: str = "gpu-a", expected=(8, "label nvidia.com/gpu.count")):
    problems, said = node_metrics_health(node, expected, by_node(metrics).get(node), metrics)
    return [(p.kind, p.severity) for p in problems], problems, said


# --- the option ------------------------------------------------------------------------------


def test_the_option_gives_a_source_with_the_defaults():
    source = prometheus_source({"url": "https://prom.example:9090/prometheus/"})
    assert source.url == "https://prom.example:9090/prometheus"
    assert (source.window, source.job, source.stale_after, source.validate_certs) == ("10m", ".*dcgm.*", 120, True)
    assert source.node_labels == ("Hostname", "hostname", "kubernetes_node", "node")
    assert source.headers == {}


def test_credentials_become_one_authorization_header():
    assert prometheus_source({"url": "http://p", "bearer_token": "t0k"}).headers == {"Authorization": "Bearer t0k"}
    basic = prometheus_source(
        {"url": "http://p", "username": "ops", "password": "s3cret", "headers": {"X-Scope-OrgID": "gpu"}}
    )
    assert basic.headers == {"X-Scope-OrgID": "gpu", "Authorization": "Basic b3BzOnMzY3JldA=="}


@pytest.mark.parametrize(
    ("option", "named"),
    [
        ({"url": "prometheus:9090"}, "prometheus.url must be an http:// or https:// URL"),
        ({"url": "http://p/api?x=1"}, "prometheus.url must not carry a query"),
        ({"url": "http://p", "window": "10 minutes"}, "prometheus.window must be a Prometheus duration"),
        ({"url": "http://p", "node_labels": ["kubernetes.io/hostname"]}, "prometheus.node_labels must be"),
        ({"url": "http://p", "job": "dcgm(", "node_labels": None}, "prometheus.job must be a regular expression"),
        ({"url": "http://p", "job": 'a"b'}, "prometheus.job must not contain quotes"),
        ({"url": "http://p", "bearer_token": "t", "username": "u", "password": "p"}, "prometheus.bearer_token and"),
        ({"url": "http://p", "username": "u"}, "prometheus.username and password go together"),
        ({"url": "http://p", "client_key": "/k.pem"}, "prometheus.client_key needs client_cert"),
        ({"url": "http://p", "stale_after": 0}, "prometheus.stale_after must be at least 1"),
    ],
)
def test_a_bad_option_value_is_an_error_naming_it(option, named):
    with pytest.raises(OptionError, match=named.replace("(", r"\(").replace("?", r"\?")):
        prometheus_source(option)


def test_credentials_in_the_url_are_refused_without_showing_them():
    with pytest.raises(OptionError) as refused:
        prometheus_source({"url": "https://ops:s3cret@prom.example:9090"})
    assert "prometheus.url must not carry credentials" in str(refused.value)
    assert "s3cret" not in str(refused.value)


def test_the_queries_are_a_fixed_set_naming_every_signal_with_the_window():
    asked = queries(prometheus_source({"url": "http://p", "window": "30m", "job": "gpu-metrics"}))
    assert set(asked) == set(QUERY_NAMES) - {Q_COLLECTED} and len(asked) == 4
    for each in (*METRIC_SIGNALS, XID_COUNT_SIGNAL):
        assert f'"{SIGNAL_LABEL}", "{each.metric}"' in asked[Q_SIGNALS]
    per_gpu = "max by (Hostname, hostname, kubernetes_node, node, gpu, UUID, uuid, modelName) (DCGM_FI_DEV_XID_ERRORS"
    assert f"{per_gpu} != 0) unless on (" in asked[Q_SIGNALS]
    assert f"{per_gpu} offset 30m != 0)" in asked[Q_SIGNALS]
    assert "[10m]" not in asked[Q_SIGNALS]
    assert asked[Q_DOWN] == 'up{job=~"gpu-metrics"} == 0'
    assert "by (Hostname, hostname, kubernetes_node, node)" in asked[Q_GPUS]


def test_recorded_reads_the_series_the_recording_rules_kept_for_the_window():
    asked = queries(prometheus_source({"url": "http://p", "window": "30m", "recorded": True}))
    assert asked[Q_SIGNALS] == 'kubegpu:dcgm_gpu_signals:bad{kubegpu_window="30m"}'
    assert asked[Q_GPUS] == 'kubegpu:dcgm_gpus:count_by_node{kubegpu_window="30m"}'
    age = 'kubegpu:dcgm_sample_age_seconds:max_by_node{kubegpu_window="30m"}'
    assert asked[Q_AGE] == f"{age} + (time() - timestamp({age}))"
    assert "DCGM_FI_DEV_XID_ERRORS" not in " ".join(asked.values())


def test_recorded_without_the_recorded_series_is_an_error_so_every_node_reads_unknown():
    source = prometheus_source({"url": "http://p", "window": "30m", "recorded": True})
    said = not_recorded(source)
    assert 'kubegpu:dcgm_gpus:count_by_node{kubegpu_window="30m"}' in said and "record_window 30m" in said
    facts = fleet_with_metrics(MetricsRead(source, 0.0, error=said))
    status = {node["name"]: node["health"]["status"] for node in facts["nodes"]}
    assert status["gpu-a"] == status["gpu-c"] == "unknown" and "healthy" not in status.values()


def test_which_metrics_are_collected_is_asked_of_the_label_values_api_over_the_lookback():
    sent = requests_at(prometheus_source({"url": "http://p"}), 1000.0)
    assert set(sent) == set(QUERY_NAMES)
    path, params = sent[Q_COLLECTED]
    assert path == "/api/v1/label/__name__/values"
    assert params["match[]"].startswith('{__name__=~"') and "DCGM_FI_DEV_ROW_REMAP_PENDING" in params["match[]"]
    assert (float(params["start"]), float(params["end"])) == (700.0, 1000.0)
    assert {sent[name][0] for name in set(QUERY_NAMES) - {Q_COLLECTED}} == {"/api/v1/query"}


# --- the node a series names -----------------------------------------------------------------


def test_a_series_names_its_node_by_the_first_node_label_it_carries():
    labels = ("Hostname", "hostname", "kubernetes_node", "node")
    published_host = exporter_labels()["Hostname"]
    assert node_of({**exporter_labels(), "node": "other"}, labels) == published_host
    assert node_of({"hostname": "", "node": "gpu-b"}, labels) == "gpu-b"
    assert node_of({"kubernetes_node": "gpu-c", "node": "gpu-d"}, labels) == "gpu-c"
    assert node_of({"instance": "10.0.0.1:9400"}, labels) is None


def test_the_exporters_newer_lowercase_hostname_label_names_the_node_too():
    labels = next(dict(lb) for m, lb, _value in published("exporter-test-head-hostname"))
    assert "Hostname" not in labels and labels["hostname"]
    assert node_of(labels, SOURCE.node_labels) == labels["hostname"]


# --- each signal -----------------------------------------------------------------------------


def test_a_healthy_node_has_no_problem_and_says_what_the_metrics_saw():
    found, _problems, said = judge(read())
    assert found == []
    assert said == {"gpus": 8, "sample_age_seconds": 3.0, "workload_xids": [], "unknown": None}


def test_a_hardware_xid_new_within_the_window_fails_the_node_naming_gpu_xid_and_metric():
    found, problems, _said = judge(read([signal("DCGM_FI_DEV_XID_ERRORS", "gpu-a", 3, 79.0)]))
    assert found == [("gpu_xid_error", "failed")]
    fields = problems[0].fields
    assert (fields["xid"], fields["meaning"], fields["gpu"], fields["uuid"]) == (
        79,
        "GPU has fallen off the bus",
        "3",
        "GPU-gpu-a-3",
    )
    assert (fields["metric"], fields["window"], fields["at"]) == (
        "DCGM_FI_DEV_XID_ERRORS",
        "10m",
        "2025-12-05T10:00:00Z",
    )


@pytest.mark.parametrize("xid", [13, 31, 43, 45, 68])
def test_a_workload_xid_is_kept_apart_and_never_a_problem(xid):
    found, _problems, said = judge(read([signal("DCGM_FI_DEV_XID_ERRORS", "gpu-a", 0, float(xid))]))
    assert found == []
    assert [w["xid"] for w in said["workload_xids"]] == [xid]


@pytest.mark.parametrize(
    ("xid", "status"), [(48, "failed"), (63, "degraded"), (94, "degraded"), (95, "failed"), (999, "degraded")]
)
def test_an_xid_is_classed_by_the_table_and_one_outside_it_degrades(xid, status):
    found, _problems, _said = judge(read([signal("DCGM_FI_DEV_XID_ERRORS", "gpu-a", 0, float(xid))]))
    assert found == [("gpu_xid_error", status)]


def test_the_windowed_xid_count_is_classed_by_its_xid_label():
    # The published injection (dcgm-exporter#239) counts XID 42 once: not in the table, so degraded.
    [(_metric, labels, value)] = published("pr-xid-count-injected")
    series = {"metric": {**labels, SIGNAL_LABEL: "DCGM_EXP_XID_ERRORS_COUNT"}, "value": value}
    metrics = read([series], gpus={labels["Hostname"]: 1})
    found, problems, _said = judge(metrics, labels["Hostname"], expected=(1, "GPUs registered"))
    assert found == [("gpu_xid_error", "degraded")] and problems[0].fields["xid"] == 42
    failed = {**series, "metric": {**series["metric"], "xid": "79"}}
    assert judge(read([failed], gpus={labels["Hostname"]: 1}), labels["Hostname"], (1, "x"))[0] == [
        ("gpu_xid_error", "failed")
    ]


@pytest.mark.parametrize(
    ("metric", "expected"),
    [
        ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", ("gpu_ecc_uncorrectable", "failed")),
        ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", ("gpu_ecc_uncorrectable", "degraded")),
        ("DCGM_FI_DEV_ROW_REMAP_FAILURE", ("gpu_row_remap_failed", "failed")),
        ("DCGM_FI_DEV_ROW_REMAP_PENDING", ("gpu_row_remap_pending", "degraded")),
        ("DCGM_FI_DEV_RETIRED_PENDING", ("gpu_retired_pages_pending", "degraded")),
    ],
)
def test_each_memory_signal_gives_its_status(metric, expected):
    found, problems, _said = judge(read([signal(metric, "gpu-a", 5, 2.0)]))
    assert found == [expected]
    assert (problems[0].fields["metric"], problems[0].fields["value"], problems[0].fields["gpu"]) == (metric, 2, "5")


def test_fewer_gpus_in_the_metrics_than_expected_degrades_the_node():
    found, problems, said = judge(read(gpus={"gpu-a": 7}))
    assert found == [("gpus_missing_from_metrics", "degraded")]
    assert (
        problems[0].fields["in_metrics"] == 7 and problems[0].fields["expected_source"] == "label nvidia.com/gpu.count"
    )
    assert said["gpus"] == 7
    assert judge(read(gpus={"gpu-a": 8}), expected=None)[0] == []


def test_a_series_of_another_node_does_not_judge_this_one():
    found, _problems, _said = judge(
        read([signal("DCGM_FI_DEV_XID_ERRORS", "gpu-b", 0, 79.0)], gpus={"gpu-a": 8, "gpu-b": 8})
    )
    assert found == []


# --- unknown, never healthy ------------------------------------------------------------------


def test_no_series_naming_the_node_is_unknown_with_the_labels_tried():
    found, problems, said = judge(read(gpus={"gpu-b": 8}))
    assert found == [("gpu_metrics_unknown", "unknown")]
    assert said["unknown"] == problems[0].fields["reason"]
    assert "no DCGM_FI_DEV_GPU_TEMP series name gpu-a by any of the labels Hostname, hostname" in said["unknown"]


def test_a_scrape_target_down_is_unknown():
    found, _problems, said = judge(read(gpus={}, down=["gpu-a"]))
    assert found == [("gpu_metrics_unknown", "unknown")]
    assert "scrape target of the exporter for the node is down" in said["unknown"]


def test_samples_older_than_stale_after_are_unknown():
    found, _problems, said = judge(read(ages={"gpu-a": 600.0}))
    assert found == [("gpu_metrics_unknown", "unknown")]
    assert "600 s old, above prometheus.stale_after 120 s" in said["unknown"]


def test_a_failed_read_leaves_every_node_unknown_with_its_reason():
    error = "Prometheus at http://127.0.0.1:9090 unreachable: [Errno 111] Connection refused"
    found, _problems, said = judge(MetricsRead(SOURCE, NOW, error=error))
    assert found == [("gpu_metrics_unknown", "unknown")] and said["unknown"] == error
    assert not_collected(MetricsRead(SOURCE, NOW, error=error)) == []


def test_a_hardware_fault_still_counts_when_the_node_is_also_unknown():
    found, _problems, _said = judge(
        read([signal("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gpu-a", 1, 1.0)], ages={"gpu-a": 900.0})
    )
    assert found == [("gpu_row_remap_failed", "failed"), ("gpu_metrics_unknown", "unknown")]


# --- what the exporter does not collect ------------------------------------------------------


def test_a_signal_without_series_while_the_exporter_is_up_is_not_collected():
    # The GPU Operator's default counters, as published: ECC, retired pages and remap pending are off.
    collected = {metric for metric, _labels, _value in published("lke-rtx4000-pod-mapping")}
    missing = not_collected(read(collected=[m for m in WATCHED_METRICS if m in collected]))
    assert [s.metric for s in missing] == [
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "DCGM_FI_DEV_ROW_REMAP_PENDING",
        "DCGM_FI_DEV_RETIRED_PENDING",
    ]
    assert missing[0].csv_line.startswith("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, counter,")


def test_nothing_is_said_not_collected_when_no_exporter_series_reached_prometheus():
    assert not_collected(read(collected=[])) == []


# --- the fleet facts judged by the metrics ---------------------------------------------------


def fleet_with_metrics(metrics, nodes=None):
    nodes = nodes or [
        make_node("gpu-a", 8, labels={"nvidia.com/gpu.count": "8"}),
        make_node("gpu-b", 8, allocatable=0),
        make_node("gpu-c", 8),
    ]
    projected = [project_node(n, DEFAULT_OPTIONS) for n in nodes]
    return summarise([n for n in projected if n], [], [], DEFAULT_OPTIONS, None, metrics)


def test_the_metrics_problems_join_each_nodes_health_and_the_worst_status_wins():
    metrics = read(
        [signal("DCGM_FI_DEV_XID_ERRORS", "gpu-a", 2, 79.0)],
        gpus={"gpu-a": 8, "gpu-b": 8},
        collected=[m for m in WATCHED_METRICS if m != "DCGM_FI_DEV_RETIRED_PENDING"],
    )
    facts = fleet_with_metrics(metrics)
    health = {n["name"]: n["health"] for n in facts["nodes"]}
    assert health["gpu-a"]["status"] == "failed"
    assert [(p["id"], p["status"], p["severity"]) for p in health["gpu-a"]["problems"]] == [
        ("health.gpu_xid_error", "failed", "error")
    ]
    # gpu-b: the device plugin withdrew all its GPUs (failed by the API) and the metrics see all 8.
    assert health["gpu-b"]["status"] == "failed" and health["gpu-b"]["metrics"]["unknown"] is None
    # gpu-c: healthy by the API, no series in the metrics: unknown, never healthy.
    assert health["gpu-c"]["status"] == "unknown"
    assert health["gpu-c"]["problems"][0]["severity"] == "warning"
    assert facts["health"] == {"healthy": 0, "unknown": 1, "degraded": 0, "failed": 2}
    assert facts["metrics"]["unknown"] == ["gpu-c"] and facts["metrics"]["queries"] == 5
    [not_collected_problem] = [p for p in facts["problems"] if p["id"] == "fleet.gpu_metric_not_collected"]
    assert "DCGM_FI_DEV_RETIRED_PENDING" in not_collected_problem["message"]
    assert (
        "DCGM_FI_DEV_RETIRED_PENDING, counter, Total number of pages pending retirement."
        in not_collected_problem["remedy"]
    )


def test_every_metric_kind_reaches_the_fleet_facts_as_a_finding():
    metrics = read(
        [
            signal("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "gpu-a", 0, 1.0),
            signal("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gpu-a", 1, 1.0),
            signal("DCGM_FI_DEV_ROW_REMAP_PENDING", "gpu-a", 2, 1.0),
            signal("DCGM_FI_DEV_RETIRED_PENDING", "gpu-a", 3, 4.0),
        ],
        gpus={"gpu-a": 8, "gpu-b": 6},
    )
    facts = fleet_with_metrics(metrics)
    ids = sorted({p["id"] for n in facts["nodes"] for p in n["health"]["problems"]})
    assert ids == [
        "health.gpu_ecc_uncorrectable",
        "health.gpu_metrics_unknown",
        "health.gpu_retired_pages_pending",
        "health.gpu_row_remap_failed",
        "health.gpu_row_remap_pending",
        "health.gpus_missing_from_metrics",
        "health.gpus_withdrawn",
    ]
    missing = next(p for p in facts["nodes"][1]["health"]["problems"] if p["id"] == "health.gpus_missing_from_metrics")
    assert missing["message"] == "6 GPU(s) in DCGM_FI_DEV_GPU_TEMP, 8 expected (GPUs registered)"


def test_a_failed_read_is_a_note_and_leaves_the_api_facts_as_they_were():
    error = "Prometheus at http://127.0.0.1:1 unreachable: [Errno 111] Connection refused"
    without = fleet_with_metrics(None)
    facts = fleet_with_metrics(MetricsRead(SOURCE, NOW, error=error))
    assert "metrics" not in without
    assert f"GPU health not judged by the DCGM exporter's metrics: {error}" in facts["notes"]
    assert facts["totals"] == without["totals"] and facts["models"] == without["models"]
    statuses = {n["name"]: n["health"]["status"] for n in facts["nodes"]}
    assert statuses == {"gpu-a": "unknown", "gpu-b": "failed", "gpu-c": "unknown"}


def test_mig_nodes_are_not_expected_to_show_their_mig_devices_as_gpus():
    # GFD under the single MIG strategy: the count label and the capacity count 1g.5gb devices.
    labels = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "nvidia.com/gpu.count": "14"}
    mig = make_node("gpu-mig", 14, labels=labels)
    facts = fleet_with_metrics(read(gpus={"gpu-mig": 2}), nodes=[mig])
    assert facts["nodes"][0]["health"]["status"] == "healthy"
