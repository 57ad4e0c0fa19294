# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The floors of the fleet facts: the pages gpu_node_facts reads, read with the standard library alone.

The same lists the module sends, with the same page size and selectors (nodes; active pods;
DeviceClasses, ResourceSlices, ResourceClaims and DeviceTaintRules), over HTTPS with
`http.client`, one kept-alive connection per list:

  --mode transfer   each page read whole and dropped; the continue token is taken from the
                    list's metadata at the head of the page, nothing is decoded (the transfer floor);
  --mode decode     each page decoded with `json.loads`, then dropped (the decode floor): what any
                    reader of these lists in Python pays before it looks at a single field.

A list the server does not serve (404) or forbids (403) ends that list, as it ends the module's.
Prints a one-line JSON summary (pages, bytes, seconds).

    python -m bench.facts_floors --kubeconfig PATH --mode decode [--page-size 500]
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import resource
import ssl
import sys
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode, urlsplit

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import RESOURCE_API_VERSION
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra_reads import DRA_LISTS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.config import (
    build_configuration,
    resolve_auth_params,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.paths import api_path
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.pods import ACTIVE_POD_FIELD_SELECTOR

# The API server writes a list's metadata (resourceVersion, continue) before its items.
_CONTINUE = re.compile(rb'"metadata":\{[^{}]*?"continue":"([^"]*)"')
HEAD = 4096


def fleet_lists() -> list[tuple[str, str | None]]:
    """(path, field selector) of every list gpu_node_facts reads, in its order."""
    return [
        (api_path("v1", "nodes"), None),
        (api_path("v1", "pods"), ACTIVE_POD_FIELD_SELECTOR),
        *((api_path(RESOURCE_API_VERSION, name), None) for name in DRA_LISTS),
    ]


def continue_in_head(page: bytes) -> str | None:
    match = _CONTINUE.search(page, 0, HEAD)
    return match.group(1).decode() if match and match.group(1) else None


def continue_decoded(page: bytes) -> str | None:
    return (json.loads(page).get("metadata") or {}).get("continue") or None


class Reader:
    """GET over HTTPS with the kubeconfig's credentials, one connection at a time."""

    def __init__(self, kubeconfig: str) -> None:
        cfg = build_configuration(resolve_auth_params({"kubeconfig": kubeconfig}))
        url = urlsplit(cfg.host)
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 443
        context = ssl.create_default_context(cafile=cfg.ssl_ca_cert)
        if not cfg.verify_ssl:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if cfg.cert_file:
            context.load_cert_chain(cfg.cert_file, cfg.key_file)
        self.context = context
        token = cfg.get_api_key_with_prefix("BearerToken") or cfg.get_api_key_with_prefix("authorization")
        self.headers = {"Accept": "application/json", **({"Authorization": token} if token else {})}
        self.pages = 0
        self.bytes = 0

    def read_list(
        self, path: str, field_selector: str | None, page_size: int, next_token: Callable[[bytes], str | None]
    ) -> None:
        connection = http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=60)
        token: str | None = None
        try:
            while True:
                query: dict[str, Any] = {"limit": page_size}
                if field_selector:
                    query["fieldSelector"] = field_selector
                if token:
                    query["continue"] = token
                connection.request("GET", f"{path}?{urlencode(query)}", headers=self.headers)
                response = connection.getresponse()
                page = response.read()
                if response.status in (403, 404):
                    return
                if response.status != 200:
                    raise SystemExit(f"GET {path}: {response.status} {page[:200]!r}")
                self.pages += 1
                self.bytes += len(page)
                token = next_token(page)
                del page
                if not token:
                    return
        finally:
            connection.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--mode", choices=("transfer", "decode"), required=True)
    parser.add_argument("--page-size", type=int, default=500)
    args = parser.parse_args()
    started = time.perf_counter()
    reader = Reader(args.kubeconfig)
    next_token = continue_in_head if args.mode == "transfer" else continue_decoded
    for path, selector in fleet_lists():
        reader.read_list(path, selector, args.page_size, next_token)
    summary = {
        "mode": args.mode,
        "pages": reader.pages,
        "bytes": reader.bytes,
        "seconds": round(time.perf_counter() - started, 3),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
