# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One Kubernetes API client: raw API paths in, plain dicts out, retries bounded, errors clear.

The official ``kubernetes`` library is used for configuration (kubeconfig, in-cluster, exec
plugins) and for its REST transport only: responses are decoded into plain dicts (with orjson
when it is installed, else ``json.loads``), never into the generated models, which are far too
slow for lists of many thousand pods.
"""

from __future__ import annotations

import json
import re
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import urlencode, urlsplit

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.library import load as load_library

if TYPE_CHECKING:
    from kubernetes.client import Configuration

try:
    import urllib3

    _LIBRARY = load_library()
    ApiException = _LIBRARY["ApiException"]
    RESTClientObject = _LIBRARY["RESTClientObject"]
except ImportError:
    pass  # kube.config records the import error; client_from_params refuses to run without the library

_fast_loads: Callable[[bytes], Any] | None
try:
    from orjson import loads as _fast_loads  # optional: decodes large lists faster
except ImportError:
    _fast_loads = None

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.config import (
    HAS_KUBERNETES,
    build_configuration,
    impersonation_headers,
    resolve_auth_params,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import (
    ClusterError,
    describe_api_error,
    describe_connection_error,
    safe_host,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.retries import (
    RETRY_STATUSES,
    backoff_delay,
    may_retry_status,
    may_retry_transport,
    retry_budget,
    retry_delay,
)


def decode_json(data: bytes) -> Any:
    """JSON text as Python objects; orjson first where installed, the standard library otherwise
    and for what orjson refuses. (The API's integers are int64, which both read alike.)"""
    if _fast_loads is not None:
        try:
            return _fast_loads(data)
        except ValueError:
            pass
    return json.loads(data)


USER_AGENT = "kubegpu.scheduling"

# The list's own metadata, when the answer begins with it: the API server writes kind, apiVersion
# and metadata before the items for its built-in lists; lists of custom resources may put the items
# first, and are then decoded before their next page is asked for.
_LIST_METADATA = re.compile(rb'\{(?:"(?:kind|apiVersion)":"[^"\\]*",)*"metadata":\{([^{}]*)\}')
_CONTINUE = re.compile(rb'"continue":"([^"\\]*)"')
_HEAD = 4096


def continue_in_head(data: bytes) -> tuple[bool, str | None]:
    """(whether the list's metadata leads the answer, its continue token) without decoding the page."""
    metadata = _LIST_METADATA.match(data, 0, _HEAD)
    if metadata is None:
        return False, None
    if b'"continue":' not in metadata.group(1):
        return True, None
    token = _CONTINUE.search(metadata.group(1))
    if token is None or not token.group(1).isascii():
        return False, None  # written in a way not read here (escapes): the decoded page will tell
    return True, token.group(1).decode("ascii") or None


@dataclass
class Transport:
    """What the client uses of the library's ApiClient: the configuration and its REST client
    (urllib3 pools, TLS, proxy), without the generated API client and its models."""

    configuration: Configuration
    rest_client: Any


def transport(cfg: Configuration) -> Transport:
    return Transport(cfg, RESTClientObject(cfg))


@dataclass
class _Response:
    status: int
    reason: str
    headers: Mapping[str, str]
    data: bytes


class KubeClient:
    """Raw API paths in, plain dicts out; retries bounded, errors as ClusterError."""

    def __init__(
        self,
        api_client: Transport,
        *,
        extra_headers: list[tuple[str, str]] | None = None,
        retries: int = 4,
        backoff: float = 0.5,
        timeout: float = 30,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.api_client = api_client
        self.configuration: Configuration = api_client.configuration
        self.host: str = self.configuration.host
        self.extra_headers = list(extra_headers or [])
        self.retries = max(0, int(retries))
        self.backoff = max(0.0, float(backoff))
        self.timeout = float(timeout)
        self.sleep = sleep
        self.request_count = 0
        self.write_count = 0

    # -- public API ----------------------------------------------------------------------

    def get(self, path: str, *, query: dict[str, Any] | None = None) -> dict[str, Any]:
        return self._json("GET", path, query=query)

    def list_items(
        self,
        path: str,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
    ) -> Iterator[dict[str, Any]]:
        """Every item of a collection, page by page (limit/continue), one dict at a time."""
        query: dict[str, Any] = {"limit": page_size}
        if label_selector:
            query["labelSelector"] = label_selector
        if field_selector:
            query["fieldSelector"] = field_selector
        # The next page is fetched while this one is decoded and the caller works through it (one
        # connection per list); one page is held decoded at a time.
        with ThreadPoolExecutor(max_workers=1) as fetcher:

            def ahead(token: str | None) -> Any:
                return fetcher.submit(self._list_page, path, query, token) if token else None

            response = self._list_page(path, query, None)
            while True:
                known, token = continue_in_head(response.data)
                upcoming = ahead(token)
                page = self._decoded("GET", path, response)
                del response
                if not known:
                    upcoming = ahead((page.get("metadata") or {}).get("continue") or None)
                items = page.get("items") or []
                del page
                yield from items
                del items
                if upcoming is None:
                    return
                response = upcoming.result()

    def _list_page(self, path: str, query: dict[str, Any], token: str | None) -> _Response:
        try:
            return self._request("GET", path, query=dict(query, **({"continue": token} if token else {})))
        except ClusterError as exc:
            if exc.status == 410 and token:
                raise ClusterError(
                    f"the list of {urlsplit(path).path} expired while it was being read (410 Gone: the "
                    "continue token is too old, the cluster changed faster than the pages were read); run again",
                    410,
                ) from None
            raise

    def patch_merge(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """JSON merge patch (RFC 7386), as ``kubectl label`` sends; a null value removes a key."""
        return self._json("PATCH", path, body=body, content_type="application/merge-patch+json")

    def patch_json(self, path: str, operations: list[dict[str, Any]]) -> dict[str, Any]:
        """JSON patch (RFC 6902): the operations apply in order, all or none; a failed `test` is a 422."""
        return self._json("PATCH", path, body=operations, content_type="application/json-patch+json")

    def apply(self, path: str, body: dict[str, Any], field_manager: str, *, dry_run: bool = False) -> dict[str, Any]:
        """Server-side apply, taking over fields another manager set (``kubectl apply --server-side
        --force-conflicts``); with ``dry_run`` the API server answers what it would store."""
        query: dict[str, Any] = {"fieldManager": field_manager, "force": True}
        if dry_run:
            query["dryRun"] = "All"
        # The body is YAML to the API server, and JSON is YAML. Handed over as a dict: every supported
        # client encodes it as JSON (kubernetes 30 encodes any apply-patch body, so text would arrive as a
        # JSON string; newer clients send text as it is and encode only structured bodies).
        return self._json("PATCH", path, body=body, query=query, content_type="application/apply-patch+yaml")

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._json("POST", path, body=body, content_type="application/json")

    def find(self, path: str) -> dict[str, Any] | None:
        """The object at `path`; None when there is none (404)."""
        try:
            return self._json("GET", path)
        except ClusterError as exc:
            if exc.status == 404:
                return None
            raise

    def delete(self, path: str, *, query: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """Delete; None when the object is already gone (404)."""
        try:
            return self._json("DELETE", path, query=query)
        except ClusterError as exc:
            if exc.status == 404:
                return None
            raise

    def read_text(self, path: str, *, query: dict[str, Any] | None = None) -> str:
        """A text response, such as ``/api/v1/namespaces/<ns>/pods/<name>/log``."""
        response = self._request("GET", path, query=query, accept="*/*")
        return response.data.decode("utf-8", errors="replace")

    # -- transport -----------------------------------------------------------------------

    def _json(self, method: str, path: str, **request: Any) -> dict[str, Any]:
        """A JSON object response; ``request`` is passed on to _request (query, body, content_type)."""
        return self._decoded(method, path, self._request(method, path, **request))

    def _decoded(self, method: str, path: str, response: _Response) -> dict[str, Any]:
        if not response.data:
            return {}
        try:
            decoded = decode_json(response.data)
        except ValueError:
            raise ClusterError(
                f"{method} {urlsplit(path).path}: the API server at {safe_host(self.host)} answered "
                f"{response.status} with a body that is not JSON",
                response.status,
            ) from None
        if not isinstance(decoded, dict):
            raise ClusterError(f"{method} {urlsplit(path).path}: expected a JSON object from the API server")
        return decoded

    def _headers(self, accept: str, content_type: str | None) -> urllib3.HTTPHeaderDict:
        headers = urllib3.HTTPHeaderDict({"Accept": accept, "User-Agent": USER_AGENT})
        if content_type:
            headers["Content-Type"] = content_type
        cfg = self.configuration
        # kubeconfig and in-cluster tokens live under "BearerToken" (older clients: "authorization");
        # reading them through the configuration runs its refresh hook (exec plugins, rotated tokens).
        token = cfg.get_api_key_with_prefix("BearerToken") or cfg.get_api_key_with_prefix("authorization")
        if token:
            headers["Authorization"] = token
        elif cfg.username and cfg.password:
            basic = cfg.get_basic_auth_token()
            if basic:
                headers["Authorization"] = basic
        for name, value in self.extra_headers:
            headers.add(name, value)
        return headers

    def _carries_credentials(self, headers: Mapping[str, str]) -> bool:
        return "Authorization" in headers or bool(self.configuration.cert_file)

    def _url(self, path: str, query: dict[str, Any] | None) -> str:
        url = self.host.rstrip("/") + "/" + path.lstrip("/")
        if query:
            pairs = {
                k: ("true" if v is True else "false" if v is False else v) for k, v in query.items() if v is not None
            }
            url += ("&" if "?" in url else "?") + urlencode(pairs, doseq=True)
        return url

    def _send_once(self, method: str, url: str, headers: Any, body: Any) -> _Response:
        self.request_count += 1
        if method in ("POST", "PUT", "PATCH", "DELETE"):
            self.write_count += 1
        try:
            with warnings.catch_warnings():
                if not self.configuration.verify_ssl:
                    warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)
                raw = self.api_client.rest_client.request(
                    method, url, headers=headers, body=body, _request_timeout=(self.timeout, self.timeout)
                )
        except ApiException as exc:
            # Clients before the pydantic regeneration raise on any status outside 2xx.
            if not exc.status:
                raise
            data = exc.body if isinstance(exc.body, bytes) else str(exc.body or "").encode()
            return _Response(int(exc.status), exc.reason or "", exc.headers or {}, data)
        try:
            data = raw.read() if getattr(raw, "data", None) is None else raw.data
        finally:
            release = getattr(getattr(raw, "response", None), "release_conn", None)
            if release is not None:
                release()
        if isinstance(data, str):  # older clients decode text bodies themselves
            data = data.encode("utf-8")
        return _Response(int(raw.status), raw.reason or "", raw.getheaders() or {}, data or b"")

    def _request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str | None = None,
        accept: str = "application/json",
    ) -> _Response:
        url = self._url(path, query)
        attempt = 0
        while True:
            # Reading the token may run an exec plugin; its failure is a CredentialError, raised here.
            headers = self._headers(accept, content_type)
            try:
                response = self._send_once(method, url, headers, body)
            except (urllib3.exceptions.HTTPError, ApiException, OSError) as exc:
                if attempt < self.retries and may_retry_transport(method, exc):
                    self.sleep(backoff_delay(attempt, self.backoff))
                    attempt += 1
                    continue
                self._fail_transport(exc, attempt)
            if response.status < 400:
                return response
            if attempt < retry_budget(response.status, self.retries) and may_retry_status(method, response.status):
                self.sleep(retry_delay(response.headers.get("Retry-After"), attempt, self.backoff))
                attempt += 1
                continue
            message = describe_api_error(
                response.status,
                response.reason,
                response.data.decode("utf-8", "replace"),
                method,
                path,
                credentials_sent=self._carries_credentials(headers),
            )
            if attempt and response.status in RETRY_STATUSES:
                message += f"; gave up after {attempt + 1} attempts"
            raise ClusterError(message, response.status)

    def _fail_transport(self, exc: BaseException, attempt: int) -> NoReturn:
        message = describe_connection_error(exc, self.host, self.timeout)
        if attempt:
            message += f"; gave up after {attempt + 1} attempts"
        raise ClusterError(message) from None


def client_from_params(
    params: Mapping[str, Any], *, retries: int = 4, backoff: float = 0.5, timeout: float = 30
) -> KubeClient:
    """A KubeClient from an Ansible module's params (or a CLI's dict) with AUTH_ARG_SPEC keys."""
    if not HAS_KUBERNETES:
        raise ClusterError("the kubernetes Python library is required (pip install kubernetes)")
    auth = resolve_auth_params(params)
    cfg = build_configuration(auth)
    return KubeClient(
        transport(cfg),
        extra_headers=impersonation_headers(auth),
        retries=retries,
        backoff=backoff,
        timeout=timeout,
    )
