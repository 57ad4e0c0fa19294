"""The DCGM exporter of many GPU nodes, played by one HTTP server on 127.0.0.1, for a real Prometheus
(tests/cluster/prometheus.py) to scrape.

`GET /nodes/<node>/metrics` answers that node's current snapshot in the Prometheus text format, as
the exporter's `/metrics` on that node would; a node set to fail answers 500 and a node it does not
know 404, so Prometheus records `up == 0` for it. `render_snapshot` writes a node's snapshot in the
line shape of a published exporter output: the labels of its render template
(internal/pkg/rendermetrics/render_metrics.go) in its order, the node's name in the host label.

    exporter = DcgmExporter().start()
    exporter.set_node("gfd-h100", render_snapshot("gfd-h100", 8, {"DCGM_FI_DEV_XID_ERRORS": {3: 79}}))
    exporter.fail_node("gfd-h100", True)
    exporter.stop()
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import threading
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOOPBACK = "127.0.0.1"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# The exporter's release whose render template and default counters the shapes follow, and HEAD,
# where the host label became `hostname` (NVIDIA/dcgm-exporter#655).
EXPORTER_RELEASE = "https://github.com/NVIDIA/dcgm-exporter/blob/691c92762eb551313c825f6efe4ceeee20982801"
EXPORTER_HEAD = "https://github.com/NVIDIA/dcgm-exporter/blob/d5e5f510a1b6b393f39a43293ccd9dc985defc79"

PRESENCE_METRIC = "DCGM_FI_DEV_GPU_TEMP"
XID_METRIC = "DCGM_FI_DEV_XID_ERRORS"
# Each GPU's series that a snapshot holds unless `values` says otherwise (None: no series): the
# presence metric and the last XID, both in the exporter's default counters.
DEFAULT_VALUES: dict[str, float] = {PRESENCE_METRIC: 40, XID_METRIC: 0}

# "name, type, help" as etc/default-counters.csv of the release writes them; a metric not listed
# here is rendered as a gauge with its name as help.
COUNTERS_CSV = """\
DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).
DCGM_FI_DEV_XID_ERRORS, gauge, Value of the last XID error encountered.
DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS, counter, Number of remapped rows for uncorrectable errors
DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS, counter, Number of remapped rows for correctable errors
DCGM_FI_DEV_ROW_REMAP_FAILURE, gauge, Whether remapping of rows has failed
DCGM_FI_DEV_ROW_REMAP_PENDING, gauge, Whether remapping of rows is pending
DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, counter, Total number of double-bit volatile ECC errors.
DCGM_FI_DEV_ECC_SBE_VOL_TOTAL, counter, Total number of single-bit volatile ECC errors.
DCGM_FI_DEV_RETIRED_PENDING, counter, Total number of pages pending retirement.
DCGM_EXP_XID_ERRORS_COUNT, counter, reported XIDs during last window
DCGM_FI_DEV_SM_CLOCK, gauge, SM clock frequency (in MHz).
DCGM_FI_DEV_POWER_USAGE, gauge, Power draw (in W).
DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).
"""
COUNTERS: dict[str, tuple[str, str]] = {
    name: (kind, help_text)
    for name, kind, help_text in (
        (part.strip() for part in line.split(",", 2)) for line in COUNTERS_CSV.splitlines() if line
    )
}

# The XID error texts the exporter puts in err_msg (internal/pkg/collector/xid_errors.go), for the
# codes the collection's XID table names; others read "Unknown Error" here.
XID_TEXTS = {
    0: "No Error",
    13: "Graphics Engine Exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    45: "Preemptive cleanup, due to previous errors -- Most likely to see when running multiple cuda",
    48: "Double Bit ECC Error",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    68: "NVDEC0 Exception",
    74: "NVLINK Error",
    79: "GPU has fallen off the bus",
    92: "High single-bit ECC error rate",
    94: "Contained ECC error",
    95: "Uncontained ECC error",
    119: "GSP RPC Timeout",
    120: "GSP Error",
    123: "SPI PMU RPC Write Failure",
    140: "Unrecovered ECC Error",
}
UNKNOWN_XID_TEXT = "Unknown Error"

# Labels whose value a snapshot fills per GPU or per node; any other label of a shape keeps the
# value its published line had (DCGM_FI_DRIVER_VERSION, container/namespace/pod...).
GPU_LABELS = ("gpu", "UUID", "uuid", "pci_bus_id", "device", "modelName")
HOST_LABELS = ("Hostname", "hostname")
_SERIES_LINE = re.compile(r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)\{(?P<labels>.*)\}\s+(?P<value>\S+)")
_LABEL_PAIR = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_-]*)="((?:[^"\\]|\\.)*)"\s*,?')


@dataclass(frozen=True)
class LineShape:
    """The labels of the exporter's per-GPU series line, in its order, each with the value a
    published line gave it (filled per GPU and node for GPU_LABELS and HOST_LABELS)."""

    labels: tuple[tuple[str, str], ...]
    # The XID line's own labels, after the others (since exporter 4.0.0).
    xid_attributes: bool = True

    @classmethod
    def from_line(cls, line: str, xid_attributes: bool = True) -> LineShape:
        """The shape of one series line of a published exporter output, e.g.
        `DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-...",...,Hostname="node-1"} 44`."""
        found = _SERIES_LINE.match(line.strip())
        if not found:
            raise ValueError(f"not a series line of the Prometheus text format: {line!r}")
        pairs = tuple(
            (m.group(1), m.group(2))
            for m in _LABEL_PAIR.finditer(found.group("labels"))
            if m.group(1) not in ("err_code", "err_msg")
        )
        if not any(name in HOST_LABELS for name, _value in pairs):
            raise ValueError(f"the line names no host label ({' or '.join(HOST_LABELS)}): {line!r}")
        return cls(pairs, xid_attributes)

    def with_host_labels(self, *names: str) -> LineShape:
        """The same shape with these host labels, in this order, where its first host label was."""
        kept = [pair for pair in self.labels if pair[0] not in HOST_LABELS]
        at = next(i for i, (name, _value) in enumerate(self.labels) if name in HOST_LABELS)
        return LineShape((*kept[:at], *((n, "") for n in names), *kept[at:]), self.xid_attributes)


# The exporter's render template at release 4.5.3-4.8.2: gpu, UUID, pci_bus_id, device, modelName,
# Hostname, then the label-type counters (DCGM_FI_DRIVER_VERSION is on by default), then the
# attributes (the XID line's err_code and err_msg; the pod mapping's container, namespace and pod,
# not rendered for GPUs no pod holds).
RELEASE_LINE = (
    'DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52",pci_bus_id="00000000:65:00.0",'
    'device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="node",DCGM_FI_DRIVER_VERSION="550.54.15"} 44'
)
RELEASE_SHAPE = LineShape.from_line(RELEASE_LINE)
# HEAD after NVIDIA/dcgm-exporter#655: the same line with `hostname`.
HEAD_SHAPE = RELEASE_SHAPE.with_host_labels("hostname")
# Both host labels, for a reader that must take either.
BOTH_HOST_LABELS_SHAPE = RELEASE_SHAPE.with_host_labels("Hostname", "hostname")
# Release 3.3.5-3.4.1, the last before the XID line got err_code and err_msg (3.3.6-3.4.2): no
# pci_bus_id either. On every later release a new XID comes as a new series (its err_code), so
# changes() over one series never sees it; on this one the XID series is one series whose value changes.
EXPORTER_3_3_5_LINE = (
    'DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52",device="nvidia0",'
    'modelName="NVIDIA H100 80GB HBM3",Hostname="node",DCGM_FI_DRIVER_VERSION="550.54.15"} 44'
)
EXPORTER_3_3_5_SHAPE = LineShape.from_line(EXPORTER_3_3_5_LINE, xid_attributes=False)


@dataclass(frozen=True)
class Gpu:
    index: int
    uuid: str
    pci_bus_id: str
    model: str


def node_gpus(node: str, count: int, model: str = "") -> list[Gpu]:
    """`count` GPUs of a node, with UUIDs that are the same for the same node name on every run."""
    gpus = []
    for index in range(count):
        digest = hashlib.sha1(f"{node}/{index}".encode()).hexdigest()
        uuid = f"GPU-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"
        gpus.append(Gpu(index, uuid, f"00000000:{0x18 + 0x10 * index:02X}:00.0", model))
    return gpus


Value = float | int | None
Values = Mapping[str, Value | Mapping[int, Value]]


def _format_value(value: float | int) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _gpu_value(metric: str, values: Values, index: int) -> Value:
    given = values.get(metric, DEFAULT_VALUES.get(metric))
    if isinstance(given, Mapping):
        return given.get(index, DEFAULT_VALUES.get(metric))
    return given


def _series_labels(shape: LineShape, node: str, gpu: Gpu) -> list[tuple[str, str]]:
    filled = {
        "gpu": str(gpu.index),
        "UUID": gpu.uuid,
        "uuid": gpu.uuid,
        "pci_bus_id": gpu.pci_bus_id,
        "device": f"nvidia{gpu.index}",
    }
    labels = []
    for name, published in shape.labels:
        if name in HOST_LABELS:
            labels.append((name, node))
        elif name == "modelName":
            labels.append((name, gpu.model or published))
        else:
            labels.append((name, filled.get(name, published)))
    return labels


def render_snapshot(
    node: str,
    gpus: int | Sequence[Gpu] = 1,
    values: Values | None = None,
    template: LineShape | str = RELEASE_SHAPE,
) -> str:
    """A node's exporter output: per metric its `# HELP` and `# TYPE` lines, then one series per GPU.

    `gpus`: a count (node_gpus) or the GPUs. `values`: metric name to a value for every GPU, or to
    {GPU index: value} (GPUs not in it take the default); None leaves the series out. The presence
    metric (DCGM_FI_DEV_GPU_TEMP) and DCGM_FI_DEV_XID_ERRORS are there by default (DEFAULT_VALUES).
    `template`: a LineShape (RELEASE_SHAPE: `Hostname`; HEAD_SHAPE: `hostname`) or a series line of a
    published output whose labels and order the snapshot takes.
    """
    shape = LineShape.from_line(template) if isinstance(template, str) else template
    devices = node_gpus(node, gpus) if isinstance(gpus, int) else list(gpus)
    given = dict(values or {})
    metrics = list(dict.fromkeys([*DEFAULT_VALUES, *given]))
    out = []
    for metric in metrics:
        series = []
        for gpu in devices:
            value = _gpu_value(metric, given, gpu.index)
            if value is None:
                continue
            labels = _series_labels(shape, node, gpu)
            if metric == XID_METRIC and shape.xid_attributes:
                code = int(value)
                labels += [("err_code", str(code)), ("err_msg", XID_TEXTS.get(code, UNKNOWN_XID_TEXT))]
            rendered = ",".join(f'{name}="{_escape(text)}"' for name, text in labels)
            series.append(f"{metric}{{{rendered}}} {_format_value(value)}")
        if series:
            kind, help_text = COUNTERS.get(metric, ("gauge", metric))
            out += [f"# HELP {metric} {help_text}", f"# TYPE {metric} {kind}", *series]
    return "\n".join(out) + "\n"


class DcgmExporter:
    """One HTTP server on 127.0.0.1 (a free port) answering every simulated node's exporter."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._snapshots: dict[str, str] = {}
        self._failing: set[str] = set()
        self._scrapes: dict[str, int] = {}
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- the server -------------------------------------------------------------------------

    def start(self) -> DcgmExporter:
        if self._server is None:
            self._server = ThreadingHTTPServer((LOOPBACK, 0), self._handler())
            self._server.daemon_threads = True
            self._thread = threading.Thread(target=self._server.serve_forever, name="dcgm-exporter", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the exporter is not started")
        return int(self._server.server_address[1])

    @property
    def address(self) -> str:
        """host:port, the scrape target's address."""
        return f"{LOOPBACK}:{self.port}"

    @staticmethod
    def metrics_path(node: str) -> str:
        return f"/nodes/{urllib.parse.quote(node, safe='')}/metrics"

    def url(self, node: str) -> str:
        return f"http://{self.address}{self.metrics_path(node)}"

    # --- the nodes, for tests ---------------------------------------------------------------

    def set_node(self, node: str, text: str) -> None:
        """The node's snapshot from now on (its next scrape answers it)."""
        with self._lock:
            self._snapshots[node] = text

    def fail_node(self, node: str, failing: bool = True) -> None:
        """Make the node's scrapes fail with HTTP 500 (True) or answer its snapshot again (False)."""
        with self._lock:
            if failing:
                self._failing.add(node)
            else:
                self._failing.discard(node)

    def remove_node(self, node: str) -> None:
        """Forget the node: its scrapes answer 404."""
        with self._lock:
            self._snapshots.pop(node, None)
            self._failing.discard(node)

    def clear(self) -> None:
        """Forget every node and the scrape counts."""
        with self._lock:
            self._snapshots.clear()
            self._failing.clear()
            self._scrapes.clear()

    def nodes(self) -> list[str]:
        with self._lock:
            return sorted(self._snapshots)

    def snapshot(self, node: str) -> str | None:
        with self._lock:
            return self._snapshots.get(node)

    def scrapes(self, node: str) -> int:
        """How many times the node's metrics were asked for, answered or not."""
        with self._lock:
            return self._scrapes.get(node, 0)

    def scrapes_total(self) -> int:
        with self._lock:
            return sum(self._scrapes.values())

    def _answer(self, path: str) -> tuple[int, str]:
        parts = urllib.parse.urlsplit(path).path.split("/")
        if len(parts) != 4 or parts[1] != "nodes" or parts[3] != "metrics":
            return 404, "not found: the exporter serves /nodes/<node>/metrics\n"
        node = urllib.parse.unquote(parts[2])
        with self._lock:
            self._scrapes[node] = self._scrapes.get(node, 0) + 1
            if node in self._failing:
                return 500, f"failed to collect the metrics of {node} (set to fail)\n"
            text = self._snapshots.get(node)
        if text is None:
            return 404, f"no exporter on node {node}\n"
        return 200, text

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the handler's name is fixed by http.server
                status, text = exporter._answer(self.path)
                body = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", CONTENT_TYPE if status == 200 else "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                # Prometheus stopped or restarted mid-scrape: nobody reads the answer.
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - http.server's name
                pass

        return Handler


def fleet_gpus(fleet: dict) -> dict[str, int]:
    """The GPU nodes of a loaded fleet file (tests/cluster/fleet.py) with their GPUs: the device
    plugin's count, or the GPUs its DRA driver publishes. What a DCGM exporter would run on."""
    found = {}
    for spec in fleet["nodes"]:
        gpus = spec.get("gpus") or (spec.get("dra") or {}).get("gpus")
        if gpus:
            found[spec["name"]] = int(gpus)
    return found
