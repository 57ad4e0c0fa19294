"""A real Prometheus on 127.0.0.1 for the tests: Debian's `prometheus` package (/usr/bin/prometheus,
2.42), scraping the simulated DCGM exporters of tests/cluster/dcgm_exporter.py as a cluster's
Prometheus scrapes dcgm-exporter: job `dcgm-exporter`, one target per node, each with the `node`
label kube-prometheus-stack's relabelling gives, so `up{job="dcgm-exporter",node=...}` exists per node.

The targets come from a file_sd JSON file that `set_nodes` rewrites; Prometheus re-reads it on
change and applies new targets within its discovery and scrape-manager throttles (5 s each), so
`set_nodes` waits until the targets API shows exactly those nodes. Queries go through the real HTTP
API (`/api/v1/query`). With `tls=True` it serves HTTPS only, with basic auth and a client
certificate required (`--web.config.file`), from a CA, server and client certificates made in its
temporary folder with the same openssl steps as the local cluster's PKI.

In a test (fixtures of tests/integration/conftest.py; `dcgm_prometheus_tls` for the TLS variant):

    def test_xid_seen(dcgm_prometheus):
        exporter, prometheus = dcgm_prometheus.exporter, dcgm_prometheus.prometheus
        for node in ("gfd-h100", "ack-v100"):
            exporter.set_node(node, render_snapshot(node, 2))
        prometheus.set_nodes(["gfd-h100", "ack-v100"])  # returns once both are scraped (about 5 s)
        exporter.set_node("gfd-h100", render_snapshot("gfd-h100", 2, {"DCGM_FI_DEV_XID_ERRORS": {1: 79}}))
        seen = prometheus.wait_until("DCGM_FI_DEV_XID_ERRORS == 79")
        assert [s["metric"]["node"] for s in seen] == ["gfd-h100"]

Alone: `DcgmPrometheus.start()` ... `.stop()`.
"""

from __future__ import annotations

import atexit
import base64
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from .cluster import _issue, make_ca
from .dcgm_exporter import DcgmExporter

LOOPBACK = "127.0.0.1"
BINARY = Path("/usr/bin/prometheus")
PACKAGE = "prometheus"
JOB = "dcgm-exporter"
# The node label a kube-prometheus-stack scrape config puts on the exporter's targets.
NODE_LABEL = "node"
USERNAME = "kubegpu"
START_TIMEOUT = 60.0


class PrometheusError(RuntimeError):
    pass


class PrometheusMissing(PrometheusError):
    pass


@dataclass(frozen=True)
class TlsFiles:
    """What a client of the TLS variant needs: the CA that signed the server's certificate, its
    client certificate and key, and the basic-auth user."""

    ca: Path
    client_cert: Path
    client_key: Path
    username: str
    password: str


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def make_tls(pki: Path, username: str = USERNAME) -> TlsFiles:
    """A CA, a server certificate for 127.0.0.1 and a client certificate (tests/cluster/cluster.py's
    openssl steps), and a basic-auth password; the web config names their files and the bcrypt hash."""
    make_ca(pki, "/CN=kubegpu-prometheus-test-ca", days=30)
    _issue(pki, "server", "/CN=prometheus", server_sans="IP:127.0.0.1,DNS:localhost", client=False)
    _issue(pki, "client", "/CN=kubegpu-prometheus-client")
    password = base64.urlsafe_b64encode(os.urandom(18)).decode()
    return TlsFiles(pki / "ca.crt", pki / "client.crt", pki / "client.key", username, password)


def bcrypt_hash(password: str) -> str:
    """The bcrypt hash Prometheus's web config takes (the `bcrypt` package of PyPI; test-requirements.txt),
    at bcrypt's lowest cost: the tests prove the check, not its cost."""
    try:
        import bcrypt
    except ImportError as exc:  # pragma: no cover - test-requirements.txt installs it
        raise PrometheusError("the TLS variant needs the bcrypt package: pip install -r test-requirements.txt") from exc
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()


def _parse_time(text: str) -> float:
    """An RFC 3339 time of the targets API (nanoseconds, Z or an offset) as seconds since the epoch."""
    text = re.sub(r"(\.\d{6})\d+", r"\1", text).replace("Z", "+00:00")
    return datetime.fromisoformat(text).timestamp()


class PrometheusServer:
    """/usr/bin/prometheus on 127.0.0.1, a free port, its TSDB and config in a temporary folder."""

    def __init__(
        self,
        target: str,
        *,
        scrape_interval: str = "1s",
        evaluation_interval: str = "1s",
        rule_files: Sequence[Path] = (),
        tls: bool = False,
        binary: Path = BINARY,
    ) -> None:
        # target: host:port of the exporter (DcgmExporter.address) that answers every node.
        self.target = target
        self.scrape_interval = scrape_interval
        self.evaluation_interval = evaluation_interval
        self.rule_files = tuple(rule_files)
        self.tls = tls
        self.binary = binary
        self.port = 0
        self.root: Path | None = None
        self.tls_files: TlsFiles | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._context: ssl.SSLContext | None = None
        self._nodes: tuple[str, ...] = ()

    # --- where it is ------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{LOOPBACK}:{self.port}"

    @property
    def interval_seconds(self) -> float:
        return _seconds(self.scrape_interval)

    @property
    def log(self) -> Path:
        return self._root() / "prometheus.log"

    @property
    def targets_file(self) -> Path:
        return self._root() / "targets.json"

    def _root(self) -> Path:
        if self.root is None:
            raise PrometheusError("Prometheus is not started")
        return self.root

    # --- start and stop ---------------------------------------------------------------------

    def start(self) -> PrometheusServer:
        if self._process is not None:
            return self
        if not (self.binary.is_file() and os.access(self.binary, os.X_OK)):
            raise PrometheusMissing(
                f"{self.binary} is not there: the tests run Debian's {PACKAGE} package "
                f"(sudo apt-get install --no-install-recommends {PACKAGE})"
            )
        self.root = Path(tempfile.mkdtemp(prefix="kubegpu-prometheus-"))
        self._write_targets(())
        if self.tls:
            self.tls_files = make_tls(self.root / "pki")
            self._context = self._client_context(self.tls_files)
        self._boot(free_port())
        atexit.register(self.stop)
        return self

    def restart(self) -> None:
        """Start again on the same port (another if it was taken meanwhile), with no targets and an
        empty TSDB: as just started, in a fraction of a second where dropping targets through
        file_sd takes Prometheus 5 to 10 s."""
        self._terminate()
        self._nodes = ()
        shutil.rmtree(self._root() / "data", ignore_errors=True)
        self._write_targets(())
        self._boot(self.port)

    def _boot(self, port: int) -> None:
        for _attempt in range(3):
            self.port = port
            self._write_config()
            logged = self.log.stat().st_size if self.log.exists() else 0
            self._launch()
            try:
                self._wait_ready()
                return
            except PrometheusError:
                in_use = b"address already in use" in self.log.read_bytes()[logged:]
                self._terminate()
                if not in_use:
                    raise
                port = free_port()
        raise PrometheusError(f"Prometheus found no free port on {LOOPBACK}: see {self.log}")

    def outage(self) -> None:
        """Stop the server as an outage would, keeping its folder: restart() brings it back empty."""
        self._terminate()

    def stop(self) -> None:
        """Stop the process this object started and remove its folder."""
        self._terminate()
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    def _launch(self) -> None:
        root = self._root()
        args = [
            str(self.binary),
            f"--config.file={root / 'prometheus.yml'}",
            f"--storage.tsdb.path={root / 'data'}",
            f"--web.listen-address={LOOPBACK}:{self.port}",
            "--web.enable-lifecycle",
        ]
        if self.tls:
            args.append(f"--web.config.file={root / 'web.yml'}")
        with self.log.open("ab") as log:
            self._process = subprocess.Popen(
                args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    def _terminate(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self._process is None or self._process.poll() is not None:
                raise PrometheusError(f"Prometheus exited at its start: {self._log_tail()}")
            try:
                if self.request("/-/ready")[0] == 200:
                    return
            except (OSError, PrometheusError):
                pass
            time.sleep(0.2)
        raise PrometheusError(f"Prometheus was not ready after {START_TIMEOUT:.0f}s: {self._log_tail()}")

    def _log_tail(self) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-15:])
        except OSError:
            return "(no log)"

    # --- configuration ----------------------------------------------------------------------

    def _write_config(self) -> None:
        root = self._root()
        config: dict[str, Any] = {
            "global": {
                "scrape_interval": self.scrape_interval,
                "scrape_timeout": self.scrape_interval,
                "evaluation_interval": self.evaluation_interval,
            },
            "scrape_configs": [
                {
                    "job_name": JOB,
                    "file_sd_configs": [{"files": [str(self.targets_file)], "refresh_interval": "1s"}],
                }
            ],
        }
        if self.rule_files:
            config["rule_files"] = [str(p) for p in self.rule_files]
        (root / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
        if self.tls_files is not None:
            tls = self.tls_files
            web = {
                "tls_server_config": {
                    "cert_file": str(root / "pki" / "server.crt"),
                    "key_file": str(root / "pki" / "server.key"),
                    "client_auth_type": "RequireAndVerifyClientCert",
                    "client_ca_file": str(tls.ca),
                },
                "basic_auth_users": {tls.username: bcrypt_hash(tls.password)},
            }
            (root / "web.yml").write_text(yaml.safe_dump(web, sort_keys=False))

    def _write_targets(self, nodes: Sequence[str]) -> None:
        groups = [
            {
                "targets": [self.target],
                "labels": {"__metrics_path__": DcgmExporter.metrics_path(node), NODE_LABEL: node},
            }
            for node in nodes
        ]
        # Written beside and renamed, so that Prometheus never reads half a file.
        partial = self.targets_file.with_suffix(".json.partial")
        partial.write_text(json.dumps(groups, indent=1))
        partial.replace(self.targets_file)

    def set_nodes(self, names: Sequence[str], wait: bool = True, timeout: float = 30) -> None:
        """Scrape exactly these nodes (one target each); with wait, return once Prometheus's
        targets are these nodes and each has been scraped since."""
        self._nodes = tuple(dict.fromkeys(names))
        self._write_targets(self._nodes)
        if wait:
            since = time.time()
            self._wait(
                lambda: self._targets_scraped_since(set(self._nodes), since),
                timeout,
                f"Prometheus's {JOB} targets to be {sorted(self._nodes)} and scraped",
            )

    @property
    def nodes(self) -> tuple[str, ...]:
        return self._nodes

    # --- the HTTP API -----------------------------------------------------------------------

    @staticmethod
    def _client_context(tls: TlsFiles) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(tls.ca))
        context.load_cert_chain(str(tls.client_cert), str(tls.client_key))
        return context

    def request(
        self, path: str, method: str = "GET", params: dict[str, str] | None = None, auth: bool = True
    ) -> tuple[int, Any]:
        """(status, decoded JSON or text) of one request; on the TLS variant with the client
        certificate, and with basic auth unless auth is False."""
        url = self.url + path + (f"?{urllib.parse.urlencode(params)}" if params else "")
        request = urllib.request.Request(url, method=method)
        if self.tls_files is not None and auth:
            token = base64.b64encode(f"{self.tls_files.username}:{self.tls_files.password}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        try:
            with urllib.request.urlopen(request, timeout=10, context=self._context) as response:
                status, body = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, body = exc.code, exc.read()
        text = body.decode(errors="replace")
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text

    def query(self, query: str) -> list[dict]:
        """An instant query's result (the vector's samples, or [time, value] of a scalar)."""
        status, body = self.request("/api/v1/query", params={"query": query})
        if status != 200 or not isinstance(body, dict) or body.get("status") != "success":
            raise PrometheusError(f"query {query!r}: {status} {body}")
        result = body["data"]["result"]
        return result if isinstance(result, list) else [result]

    def wait_until(
        self, query: str, predicate: Callable[[list[dict]], object] = bool, timeout: float = 30
    ) -> list[dict]:
        """Poll the query until predicate(result) is true; the result, or an AssertionError with the last one."""
        last: list[dict] = []

        def holds() -> bool:
            nonlocal last
            last = self.query(query)
            return bool(predicate(last))

        self._wait(holds, timeout, f"{query!r} to satisfy the predicate", lambda: f"last result: {last}")
        return last

    def _wait(
        self, check: Callable[[], object], timeout: float, what: str, detail: Callable[[], str] = lambda: ""
    ) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}. {detail()}".strip())
            time.sleep(min(0.25, self.interval_seconds / 2))

    def targets(self) -> list[dict]:
        """The job's active targets as the targets API says them (labels, health, lastScrape...)."""
        status, body = self.request("/api/v1/targets", params={"state": "active"})
        if status != 200 or not isinstance(body, dict):
            raise PrometheusError(f"targets: {status} {body}")
        return [t for t in body["data"]["activeTargets"] if t.get("scrapePool") == JOB]

    def _targets_scraped_since(self, nodes: set[str], since: float, scrapes: int = 1) -> bool:
        targets = self.targets()
        if {t["labels"].get(NODE_LABEL) for t in targets} != nodes:
            return False
        later = since + (scrapes - 1) * self.interval_seconds
        return all(_parse_time(t["lastScrape"]) >= later for t in targets)

    def wait_scrapes(self, n: int = 1, timeout: float = 30) -> None:
        """Return once every target has been scraped n times since this call (the last of them done)."""
        since = time.time()
        self._wait(
            lambda: self._targets_scraped_since(set(self._nodes), since, n),
            timeout + n * self.interval_seconds,
            f"{n} scrapes of every {JOB} target",
        )

    def reload(self) -> None:
        """Re-read prometheus.yml and the rule files (POST /-/reload)."""
        status, body = self.request("/-/reload", method="POST")
        if status != 200:
            raise PrometheusError(f"reload: {status} {body}")


def _seconds(duration: str) -> float:
    """Seconds of a Prometheus duration: 1s, 500ms, 1m, 1m30s."""
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    parts = re.findall(r"(\d+)(ms|s|m|h)", duration)
    if not parts or "".join(n + u for n, u in parts) != duration:
        raise ValueError(f"not a Prometheus duration: {duration!r}")
    return sum(int(n) * units[u] for n, u in parts)


@dataclass
class DcgmPrometheus:
    """The simulated exporters of many nodes and a real Prometheus scraping them; on the TLS variant
    also what a client needs (url, ca, client_cert, client_key, username, password)."""

    exporter: DcgmExporter
    prometheus: PrometheusServer

    @classmethod
    def start(cls, tls: bool = False, scrape_interval: str = "1s", rule_files: Sequence[Path] = ()) -> DcgmPrometheus:
        exporter = DcgmExporter().start()
        try:
            prometheus = PrometheusServer(
                exporter.address, scrape_interval=scrape_interval, tls=tls, rule_files=rule_files
            ).start()
        except BaseException:
            exporter.stop()
            raise
        return cls(exporter, prometheus)

    def serve(self, snapshots: dict[str, str], wait: bool = True) -> None:
        """These nodes' snapshots, and Prometheus scraping exactly these nodes; with wait, returns once
        each has been scraped (about 5 s: Prometheus's discovery throttle)."""
        for node, text in snapshots.items():
            self.exporter.set_node(node, text)
        self.prometheus.set_nodes(list(snapshots), wait=wait)

    def reset(self) -> None:
        """No nodes, no targets, no samples: the exporter forgets its nodes, Prometheus restarts empty."""
        self.exporter.clear()
        self.prometheus.restart()

    def reset_if_used(self) -> None:
        """reset, unless nothing was set since the last one."""
        if self.exporter.nodes() or self.exporter.scrapes_total() or self.prometheus.nodes:
            self.reset()

    def stop(self) -> None:
        self.prometheus.stop()
        self.exporter.stop()

    @property
    def url(self) -> str:
        return self.prometheus.url

    def _tls(self) -> TlsFiles:
        if self.prometheus.tls_files is None:
            raise PrometheusError("this Prometheus serves plain HTTP: no certificates or users")
        return self.prometheus.tls_files

    @property
    def ca(self) -> Path:
        return self._tls().ca

    @property
    def client_cert(self) -> Path:
        return self._tls().client_cert

    @property
    def client_key(self) -> Path:
        return self._tls().client_key

    @property
    def username(self) -> str:
        return self._tls().username

    @property
    def password(self) -> str:
        return self._tls().password
