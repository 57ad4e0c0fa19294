# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The DCGM exporter's metrics, read through the cluster's Prometheus: the one place the fleet
facts talk to Prometheus. A fixed set of requests over the whole fleet, sent together and all
evaluated at the same instant, whatever the number of nodes; never a query per node. They run
while the facts read the API server (read_beside), so on a fleet whose Prometheus answers within
the API server's lists they add no time.

What the option says is checked before anything is read (a bad URL, window or label name is an
OptionError naming it). What Prometheus says is never an exception: unreachable, refused
credentials, a refused query or an answer that is not the Prometheus API leave the read's
``error`` set, and the nodes it should have judged read unknown.
"""

from __future__ import annotations

import base64
import json
import re
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dcgm_promql import (
    RECORDED_GPUS,
    RECORDED_SIGNALS,
    collected_selector,
    gpu_count_expr,
    recorded,
    recorded_age_expr,
    sample_age_expr,
    signals_expr,
    targets_down_expr,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dcgm_signals import NODE_LABELS, WATCHED_METRICS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.options.groups import GROUPS, PROMETHEUS

OPTION = PROMETHEUS
# The option's defaults, as its group declares them.
DEFAULTS = {name: spec.get("default") for name, spec in GROUPS[PROMETHEUS][OPTION]["options"].items()}
# The requests, by name: one query for every signal at once, and four reads about the exporter itself.
Q_SIGNALS = "signals"
Q_GPUS = "gpus"
Q_AGE = "sample_age"
Q_COLLECTED = "collected"
Q_DOWN = "targets_down"
QUERY_NAMES = (Q_SIGNALS, Q_GPUS, Q_AGE, Q_COLLECTED, Q_DOWN)

# How far back the metrics the exporter collects are looked for: Prometheus's lookback of an instant query.
LOOKBACK_SECONDS = 300
QUERY_PATH = "/api/v1/query"
NAMES_PATH = "/api/v1/label/__name__/values"

_DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


@dataclass(frozen=True)
class PrometheusSource:
    """Where Prometheus is, how to reach it, and how its series are read."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    ca_cert: str | None = None
    client_cert: str | None = None
    client_key: str | None = None
    validate_certs: bool = True
    proxy: str | None = None
    timeout: int = DEFAULTS["timeout"]
    node_labels: tuple[str, ...] = NODE_LABELS
    window: str = DEFAULTS["window"]
    job: str = DEFAULTS["job"]
    stale_after: int = DEFAULTS["stale_after"]
    recorded: bool = DEFAULTS["recorded"]


@dataclass(frozen=True)
class MetricsRead:
    """What the queries answered: per query name its series (``metric`` labels and the value as a
    float), or ``error`` saying why nothing can be trusted."""

    source: PrometheusSource
    at: float
    series: Mapping[str, Sequence[Mapping[str, Any]]] = field(default_factory=dict)
    error: str | None = None
    requests: int = 0


def _option_error(key: str, why: str) -> OptionError:
    return OptionError(f"{OPTION}.{key} {why}")


def _checked_url(url: Any) -> str:
    parsed = urllib.parse.urlparse(str(url or ""))
    if parsed.username or parsed.password:
        # Said without the URL, which would show the password.
        raise _option_error("url", "must not carry credentials: give prometheus.username and password")
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise _option_error("url", f"must be an http:// or https:// URL of the Prometheus server, not {url!r}")
    if parsed.query or parsed.fragment:
        raise _option_error("url", f"must not carry a query or fragment: {url!r}")
    return str(url).rstrip("/")


def _auth_headers(option: Mapping[str, Any]) -> dict[str, str]:
    token, username, password = option.get("bearer_token"), option.get("username"), option.get("password")
    if token and (username or password):
        raise _option_error("bearer_token", "and username/password are two ways to sign in: give one")
    if bool(username) != bool(password):
        raise _option_error("username", "and password go together: give both or neither")
    if token:
        return {"Authorization": f"Bearer {token}"}
    if username:
        basic = base64.b64encode(f"{username}:{password}".encode()).decode()
        return {"Authorization": f"Basic {basic}"}
    return {}


def prometheus_source(option: Mapping[str, Any]) -> PrometheusSource:
    """The source the ``prometheus`` option describes, every value checked; an OptionError naming
    the first bad one."""
    window = str(option.get("window") or DEFAULTS["window"])
    if not _DURATION.match(window):
        raise _option_error("window", f"must be a Prometheus duration such as 10m or 1h30m, not {window!r}")
    labels = tuple(option.get("node_labels") or NODE_LABELS)
    bad = [label for label in labels if not _LABEL_NAME.match(label)]
    if bad:
        raise _option_error("node_labels", f"must be Prometheus label names; not: {', '.join(bad)}")
    job = str(option.get("job") or DEFAULTS["job"])
    try:
        re.compile(job)
    except re.error as error:
        raise _option_error("job", f"must be a regular expression ({error}): {job!r}") from None
    if '"' in job or "\\" in job:
        raise _option_error("job", f"must not contain quotes or backslashes: {job!r}")
    if option.get("client_key") and not option.get("client_cert"):
        raise _option_error("client_key", "needs client_cert")
    for key in ("timeout", "stale_after"):
        if option.get(key) is not None and int(option[key]) < 1:
            raise _option_error(key, f"must be at least 1, not {option[key]}")
    return PrometheusSource(
        url=_checked_url(option.get("url")),
        headers={**{str(k): str(v) for k, v in (option.get("headers") or {}).items()}, **_auth_headers(option)},
        ca_cert=option.get("ca_cert"),
        client_cert=option.get("client_cert"),
        client_key=option.get("client_key"),
        validate_certs=option.get("validate_certs", True) is not False,
        proxy=option.get("proxy") or None,
        timeout=int(option.get("timeout") or DEFAULTS["timeout"]),
        node_labels=labels,
        window=window,
        job=job,
        stale_after=int(option.get("stale_after") or DEFAULTS["stale_after"]),
        recorded=option.get("recorded") is True,
    )


def queries(source: PrometheusSource) -> dict[str, str]:
    """The fixed set of instant queries, by name: the same at 5 nodes and at 5,000. With ``recorded``,
    the series the recording rules kept for the window instead of the signals and the GPU series."""
    if source.recorded:
        signals = recorded(RECORDED_SIGNALS, source.window)
        gpus, age = recorded(RECORDED_GPUS, source.window), recorded_age_expr(source.window)
    else:
        signals = signals_expr(source.window, source.node_labels)
        gpus, age = gpu_count_expr(source.node_labels), sample_age_expr(source.node_labels)
    return {Q_SIGNALS: signals, Q_GPUS: gpus, Q_AGE: age, Q_DOWN: targets_down_expr(source.job)}


def requests_at(source: PrometheusSource, at: float) -> dict[str, tuple[str, dict[str, str]]]:
    """Every request of the read, by name: its API path and parameters. Which health metrics the
    exporter collects is asked of the label-values API, which reads the index only: as an instant
    query it would read every GPU's sample of every watched metric."""
    instant = {name: (QUERY_PATH, {"query": expr, "time": f"{at:.3f}"}) for name, expr in queries(source).items()}
    since = {"start": f"{at - LOOKBACK_SECONDS:.3f}", "end": f"{at:.3f}"}
    return {**instant, Q_COLLECTED: (NAMES_PATH, {"match[]": collected_selector(WATCHED_METRICS), **since})}


def url_opener(source: PrometheusSource) -> urllib.request.OpenerDirector:
    context = ssl.create_default_context(cafile=source.ca_cert) if source.url.startswith("https") else None
    if context is not None:
        if not source.validate_certs:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if source.client_cert:
            context.load_cert_chain(source.client_cert, source.client_key)
    proxies = {"http": source.proxy, "https": source.proxy} if source.proxy else None
    return urllib.request.build_opener(
        urllib.request.ProxyHandler(proxies), urllib.request.HTTPSHandler(context=context)
    )


class QueryRefused(Exception):
    """Prometheus, or what stands at its URL, did not answer a query with data."""


def _http_error_text(error: urllib.error.HTTPError) -> str:
    try:
        body = json.loads(error.read() or b"{}")
    except ValueError:
        body = {}
    said = f": {body.get('errorType')}: {body.get('error')}" if isinstance(body, dict) and body.get("error") else ""
    hint = " (check prometheus.bearer_token, username and password, or client_cert)" if error.code in (401, 403) else ""
    return f"HTTP {error.code} {error.reason}{said}{hint}"


def _get(opener: urllib.request.OpenerDirector, source: PrometheusSource, path: str, params: dict[str, str]) -> Any:
    """The ``data`` of Prometheus's answer to one API request."""
    url = f"{source.url}{path}?" + urllib.parse.urlencode(params)
    request = urllib.request.Request(url, headers={"Accept": "application/json", **source.headers})
    try:
        with opener.open(request, timeout=source.timeout) as response:
            body = json.loads(response.read())
    except urllib.error.HTTPError as error:
        raise QueryRefused(_http_error_text(error)) from None
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise QueryRefused(f"unreachable: {reason}") from None
    except ValueError:
        raise QueryRefused("answered with something that is not JSON: is the URL Prometheus's?") from None
    if not isinstance(body, dict) or body.get("status") != "success":
        said = body if isinstance(body, dict) else {}
        raise QueryRefused(f"refused the query: {said.get('errorType')}: {said.get('error')}")
    return body.get("data")


def run_query(opener: urllib.request.OpenerDirector, source: PrometheusSource, expr: str, at: float) -> list[dict]:
    return _series(_get(opener, source, QUERY_PATH, {"query": expr, "time": f"{at:.3f}"}), QUERY_PATH)


def _series(data: Any, path: str) -> list[dict]:
    """The answer as series: an instant vector's, or one per name the label-values API gave."""
    if path == NAMES_PATH:
        if not isinstance(data, list):
            raise QueryRefused("answered the label values with something that is not a list")
        return [{"metric": {"__name__": str(name)}, "value": 1.0} for name in data]
    if not isinstance(data, dict) or data.get("resultType") != "vector":
        raise QueryRefused("answered the query with something that is not an instant vector")
    return [{"metric": s.get("metric") or {}, "value": float(s["value"][1])} for s in data.get("result") or []]


def read_metrics(source: PrometheusSource, now: float | None = None) -> MetricsRead:
    """Send the requests together, all about one instant. A failure of any ends the read (the first
    in the order of QUERY_NAMES is said): a part of the answers judges nodes by less than they need."""
    at = time.time() if now is None else now
    try:
        opener = url_opener(source)
    except (OSError, ssl.SSLError) as error:
        files = "prometheus.ca_cert, client_cert or client_key"
        return MetricsRead(source, at, error=f"{files} could not be loaded for {source.url}: {error}")
    requests = requests_at(source, at)

    def answer(name: str) -> list[dict] | QueryRefused:
        path, params = requests[name]
        try:
            return _series(_get(opener, source, path, params), path)
        except QueryRefused as refused:
            return refused

    with ThreadPoolExecutor(max_workers=len(requests)) as pool:
        answers = dict(zip(QUERY_NAMES, pool.map(answer, QUERY_NAMES), strict=True))
    for answered in answers.values():
        if isinstance(answered, QueryRefused):
            return MetricsRead(source, at, error=f"Prometheus at {source.url} {answered}", requests=len(requests))
    if source.recorded and not answers[Q_GPUS]:
        return MetricsRead(source, at, error=not_recorded(source), requests=len(requests))
    return MetricsRead(source, at, series=answers, requests=len(requests))  # type: ignore[arg-type]


def not_recorded(source: PrometheusSource) -> str:
    return (
        f"Prometheus at {source.url} has no series of {recorded(RECORDED_GPUS, source.window)}: with "
        f"prometheus.recorded, load the recording rules gpu_alert_rules renders with record_window {source.window} "
        "(the window of this read), or leave prometheus.recorded off"
    )


Read = TypeVar("Read")


def read_beside(source: PrometheusSource | None, read: Callable[[], Read]) -> tuple[Read, MetricsRead | None]:
    """``read()`` (the API server's lists), and the metrics read from ``source`` meanwhile in a
    thread: both wait on the network, so the slower of the two is the time they take."""
    if source is None:
        return read(), None
    with ThreadPoolExecutor(max_workers=1) as pool:
        metrics = pool.submit(read_metrics, source)
        return read(), metrics.result()
