"""The connection layer: options, configuration, error messages, retries and pagination.

HTTP behaviour is checked against a tiny server on 127.0.0.1; nothing else is contacted.
"""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import subprocess
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import urllib3
import yaml

from ansible_collections.kubegpu.scheduling.plugins.doc_fragments.connection import ModuleDocFragment
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube import client as client_module
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import (
    KubeClient,
    client_from_params,
    continue_in_head,
    decode_json,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.config import (
    AUTH_ARG_SPEC,
    AUTH_ENV_VARS,
    PROXY_HEADERS_ENV_VARS,
    build_configuration,
    has_explicit_credentials,
    k8s_config,
    kubeconfig_secret_values,
    resolve_auth_params,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import (
    ClusterError,
    describe_api_error,
    describe_connection_error,
    parse_api_path,
    rbac_verb,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.retries import (
    MAX_BACKOFF,
    MAX_RETRY_AFTER,
    THROTTLE_RETRIES,
    backoff_delay,
    may_retry_status,
    parse_retry_after,
    retry_budget,
)

TOKEN = "s3cr3t-token-value"
PASSWORD = "hunter2-password"


# ---------------------------------------------------------------------------------------
# Fixtures: a clean environment and a canned API server
# ---------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    auth_vars = [v for vars_ in AUTH_ENV_VARS.values() for v in vars_] + list(PROXY_HEADERS_ENV_VARS.values())
    for var in auth_vars + ["KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"]:
        monkeypatch.delenv(var, raising=False)
    for var in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))


@dataclass
class Reply:
    status: int = 200
    body: Any = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: Any
    body: bytes


class FakeApi:
    """Replies in order per (method, path); the last reply repeats."""

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], list[Reply]] = {}
        self.seen: list[Seen] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                api.seen.append(Seen(self.command, parts.path, parse_qs(parts.query), self.headers, body))
                queue = api.routes.get((self.command, parts.path)) or [Reply(404, {"kind": "Status"})]
                reply = queue.pop(0) if len(queue) > 1 else queue[0]
                if reply.delay:
                    time.sleep(reply.delay)
                data = (
                    reply.body
                    if isinstance(reply.body, bytes)
                    else (reply.body.encode() if isinstance(reply.body, str) else json.dumps(reply.body).encode())
                )
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _handle

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.handle_error = lambda request, address: None  # type: ignore[method-assign]
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"

    def add(self, method: str, path: str, *replies: Reply) -> None:
        self.routes[(method, path)] = list(replies)

    def start(self) -> None:
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def api() -> Any:
    server = FakeApi()
    server.start()
    yield server
    server.stop()


def make_client(url: str, retries: int = 4, timeout: float = 5, **params: Any) -> tuple[KubeClient, list[float]]:
    client = client_from_params(
        {"host": url, "api_key": TOKEN, **params}, retries=retries, backoff=0.01, timeout=timeout
    )
    sleeps: list[float] = []
    client.sleep = sleeps.append
    return client, sleeps


def status_body(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ---------------------------------------------------------------------------------------
# Options and their documentation
# ---------------------------------------------------------------------------------------


def test_doc_fragment_documents_every_option_as_the_argspec_declares_it() -> None:
    documented = yaml.safe_load(ModuleDocFragment.DOCUMENTATION)["options"]
    assert set(documented) == set(AUTH_ARG_SPEC)
    for name, spec in AUTH_ARG_SPEC.items():
        doc = documented[name]
        assert doc["type"] == spec["type"], name
        assert doc.get("aliases", []) == spec.get("aliases", []), name
        assert doc.get("elements") == spec.get("elements"), name
        if "options" in spec:
            assert set(doc["suboptions"]) == set(spec["options"]), name
            for key, suboption in doc["suboptions"].items():
                assert suboption["type"] == spec["options"][key]["type"], f"{name}.{key}"
                assert PROXY_HEADERS_ENV_VARS[key] in " ".join(suboption["description"]), f"{name}.{key}"
            continue
        text = " ".join(doc["description"])
        assert AUTH_ENV_VARS[name][-1] in text, name
        assert "default" not in spec, f"{name}: a default would hide its environment variable"
    assert AUTH_ARG_SPEC["api_key"]["no_log"] and AUTH_ARG_SPEC["password"]["no_log"]


def test_parameters_win_over_environment_and_environment_fills_the_rest() -> None:
    env = {
        "K8S_AUTH_HOST": "https://env.example:6443",
        "K8S_AUTH_API_KEY": "env-token",
        "K8S_AUTH_VERIFY_SSL": "no",
        "K8S_AUTH_SSL_CA_CERT": "~/ca.crt",
        "K8S_AUTH_CERT_FILE": "/c.crt",
        "K8S_AUTH_KEY_FILE": "/c.key",
        "K8S_AUTH_CONTEXT": "ctx",
        "K8S_AUTH_KUBECONFIG": "/kube/config",
        "K8S_AUTH_USERNAME": "u",
        "K8S_AUTH_PASSWORD": "p",
        "K8S_AUTH_PROXY": "http://proxy:3128",
        "K8S_AUTH_NO_PROXY": "localhost,10.0.0.0/8",
        "K8S_AUTH_IMPERSONATE_USER": "alice",
        "K8S_AUTH_IMPERSONATE_GROUPS": "ops, gpu-admins,",
    }
    auth = resolve_auth_params({"host": "https://param.example", "validate_certs": None}, env)
    assert auth["host"] == "https://param.example"
    assert auth["api_key"] == "env-token"
    assert auth["validate_certs"] is False
    assert auth["ca_cert"].endswith("/ca.crt") and not auth["ca_cert"].startswith("~")
    assert (auth["client_cert"], auth["client_key"]) == ("/c.crt", "/c.key")
    assert (auth["context"], auth["kubeconfig"]) == ("ctx", "/kube/config")
    assert (auth["username"], auth["password"]) == ("u", "p")
    assert (auth["proxy"], auth["no_proxy"]) == ("http://proxy:3128", "localhost,10.0.0.0/8")
    assert auth["impersonate_user"] == "alice"
    assert auth["impersonate_groups"] == ["ops", "gpu-admins"]


def test_option_names_of_kubernetes_core_and_aliases_resolve() -> None:
    env = {"K8S_AUTH_VALIDATE_CERTS": "true", "K8S_AUTH_VERIFY_SSL": "false"}
    assert resolve_auth_params({}, env)["validate_certs"] is True
    auth = resolve_auth_params({"verify_ssl": "false", "ssl_ca_cert": "/ca", "cert_file": "/c", "key_file": "/k"}, {})
    assert (auth["validate_certs"], auth["ca_cert"], auth["client_cert"], auth["client_key"]) == (
        False,
        "/ca",
        "/c",
        "/k",
    )
    assert resolve_auth_params({}, {"K8S_AUTH_HOST": ""})["host"] is None
    assert resolve_auth_params({"impersonate_groups": "a,b"}, {})["impersonate_groups"] == ["a", "b"]


def test_a_bad_boolean_in_the_environment_is_named() -> None:
    with pytest.raises(ClusterError, match=r"^K8S_AUTH_VERIFY_SSL: 'maybe' is not a boolean"):
        resolve_auth_params({}, {"K8S_AUTH_VERIFY_SSL": "maybe"})


def test_kubeconfig_must_be_a_path_or_a_dict() -> None:
    with pytest.raises(ClusterError, match="kubeconfig must be a path or a dict"):
        resolve_auth_params({"kubeconfig": ["a"]}, {})


@pytest.mark.parametrize(
    "params, expected",
    [
        ({"host": "h", "api_key": "t"}, True),
        ({"host": "h", "username": "u", "password": "p"}, True),
        ({"host": "h", "client_cert": "c", "client_key": "k"}, True),
        ({"host": "h"}, False),
        ({"host": "h", "username": "u"}, False),
        ({"api_key": "t"}, False),
    ],
)
def test_explicit_credentials(params: dict[str, str], expected: bool) -> None:
    assert has_explicit_credentials(params) is expected


# ---------------------------------------------------------------------------------------
# Configuration: kubeconfig, in-cluster, explicit
# ---------------------------------------------------------------------------------------


def kubeconfig_dict(current: str | None = "one") -> dict[str, Any]:
    data: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "c1", "cluster": {"server": "http://127.0.0.1:7001"}},
            {"name": "c2", "cluster": {"server": "http://127.0.0.1:7002/"}},
        ],
        "users": [
            {"name": "u1", "user": {"token": TOKEN}},
            {"name": "u2", "user": {"username": "bob", "password": PASSWORD}},
        ],
        "contexts": [
            {"name": "one", "context": {"cluster": "c1", "user": "u1"}},
            {"name": "two", "context": {"cluster": "c2", "user": "u2"}},
        ],
    }
    if current:
        data["current-context"] = current
    return data


def auth_header(client: KubeClient) -> str | None:
    return client._headers("application/json", None).get("Authorization")


def test_kubeconfig_dict_with_its_current_context() -> None:
    client = client_from_params({"kubeconfig": kubeconfig_dict()})
    assert client.host == "http://127.0.0.1:7001"
    assert auth_header(client) == f"Bearer {TOKEN}"


def test_kubeconfig_dict_with_a_chosen_context() -> None:
    client = client_from_params({"kubeconfig": kubeconfig_dict(), "context": "two"})
    assert client.host == "http://127.0.0.1:7002"
    assert (auth_header(client) or "").startswith("Basic ")


def test_unknown_context_lists_the_known_ones_and_no_secret() -> None:
    with pytest.raises(ClusterError) as err:
        client_from_params({"kubeconfig": kubeconfig_dict(), "context": "prod"})
    assert err.value.message == (
        'context "prod" not found in kubeconfig (given as a dict); available contexts: one, two'
    )
    with pytest.raises(ClusterError) as err:
        client_from_params({"kubeconfig": kubeconfig_dict(current=None)})
    assert err.value.message == (
        "kubeconfig (given as a dict) has no current-context; set the context option; available contexts: one, two"
    )


def test_kubeconfig_file_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(kubeconfig_dict()))
    monkeypatch.setenv("K8S_AUTH_KUBECONFIG", str(path))
    monkeypatch.setenv("K8S_AUTH_CONTEXT", "two")
    assert client_from_params({}).host == "http://127.0.0.1:7002"


def test_default_kubeconfig_from_KUBECONFIG(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(kubeconfig_dict()))
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'missing'}:{path}")
    client = client_from_params({})
    assert client.host == "http://127.0.0.1:7001"


def test_several_kubeconfig_files_first_current_context_wins(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.write_text(yaml.safe_dump(kubeconfig_dict("one")))
    second.write_text(yaml.safe_dump(kubeconfig_dict("two")))
    assert client_from_params({"kubeconfig": f"{first}:{second}"}).host == "http://127.0.0.1:7001"


def test_missing_kubeconfig_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(ClusterError) as err:
        client_from_params({"kubeconfig": str(missing)})
    assert err.value.message == f"kubeconfig file not found: {missing} (kubeconfig option or K8S_AUTH_KUBECONFIG)"


def test_malformed_kubeconfig_names_the_file_and_line_but_not_the_content(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text(f"users:\n- name: u\n  user: {{token: {TOKEN}\n")
    with pytest.raises(ClusterError) as err:
        client_from_params({"kubeconfig": str(path)})
    assert err.value.message.startswith(f"kubeconfig {path} is not valid YAML: ")
    assert "line 4" in err.value.message
    assert TOKEN not in err.value.message


@pytest.mark.parametrize(
    "content, problem",
    [
        ("", "expected a mapping with clusters, contexts and users"),
        ("- a\n- b\n", "expected a mapping with clusters, contexts and users"),
        (
            yaml.safe_dump({"contexts": [{"name": "x", "context": {"cluster": "gone"}}], "current-context": "x"}),
            'cluster "gone" of context "x" is not defined',
        ),
    ],
)
def test_kubeconfig_of_the_wrong_shape(tmp_path: Path, content: str, problem: str) -> None:
    path = tmp_path / "config"
    path.write_text(content)
    with pytest.raises(ClusterError) as err:
        client_from_params({"kubeconfig": str(path)})
    assert err.value.message == f"kubeconfig {path} is invalid: {problem}"


def test_kubeconfig_the_library_rejects_gives_a_message_without_secrets() -> None:
    data = kubeconfig_dict()
    data["users"][0]["user"] = {"token": TOKEN, "client-certificate": "/no/such/cert.pem"}
    data["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:7001"
    with pytest.raises(ClusterError) as err:
        client_from_params({"kubeconfig": data})
    assert err.value.message == ("kubeconfig (given as a dict) cannot be used: File does not exist: /no/such/cert.pem")


def test_nothing_configured_says_what_was_tried(tmp_path: Path) -> None:
    with pytest.raises(ClusterError) as err:
        client_from_params({})
    assert err.value.message.startswith(
        f"no cluster configured: no kubeconfig at {tmp_path / 'no-such-kubeconfig'} (from KUBECONFIG), "
        "not running in a pod (KUBERNETES_SERVICE_HOST unset), and no host given"
    )


def test_in_cluster_failure_is_explained(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "6443")
    monkeypatch.setattr(k8s_config.incluster_config, "SERVICE_TOKEN_FILENAME", "/nonexistent/token")
    with pytest.raises(ClusterError) as err:
        build_configuration(resolve_auth_params({}))
    assert err.value.message.startswith(
        f"no cluster configured: no kubeconfig at {tmp_path / 'no-such-kubeconfig'} (from KUBECONFIG), "
        "the in-cluster configuration failed (KUBERNETES_SERVICE_HOST is set: Service token file does not exist), "
        "and no host given; "
    )


def mount_service_account(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A pod's environment: KUBERNETES_SERVICE_HOST set, a service account token and CA in tmp_path."""
    (tmp_path / "token").write_text("sa-token")
    (tmp_path / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "6443")
    monkeypatch.setattr(k8s_config.incluster_config, "SERVICE_TOKEN_FILENAME", str(tmp_path / "token"))
    monkeypatch.setattr(k8s_config.incluster_config, "SERVICE_CERT_FILENAME", str(tmp_path / "ca.crt"))


def test_in_cluster_service_account(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    mount_service_account(monkeypatch, tmp_path)
    client = client_from_params({})
    assert client.host == "https://127.0.0.1:6443"
    assert auth_header(client) == "bearer sa-token"
    assert client.configuration.ssl_ca_cert == str(tmp_path / "ca.crt")


def test_explicit_host_and_token_skip_a_broken_kubeconfig(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.write_text(": : :")
    monkeypatch.setenv("KUBECONFIG", str(broken))
    client = client_from_params({"host": "127.0.0.1:6443/", "api_key": TOKEN})
    assert client.host == "https://127.0.0.1:6443"
    assert client.configuration.verify_ssl is True
    assert auth_header(client) == f"Bearer {TOKEN}"


def test_explicit_options_override_the_kubeconfig(tmp_path: Path) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_text("x")
    client = client_from_params(
        {"kubeconfig": kubeconfig_dict(), "host": "http://127.0.0.1:7999", "ca_cert": str(ca), "validate_certs": False}
    )
    cfg = client.configuration
    assert (client.host, cfg.ssl_ca_cert, cfg.verify_ssl) == ("http://127.0.0.1:7999", str(ca), False)
    assert auth_header(client) == f"Bearer {TOKEN}"


def test_missing_certificate_files_and_half_a_client_certificate(tmp_path: Path) -> None:
    with pytest.raises(ClusterError, match=r"^ca_cert file not found: /no/ca\.crt$"):
        client_from_params({"host": "https://127.0.0.1:1", "api_key": "t", "ca_cert": "/no/ca.crt"})
    with pytest.raises(ClusterError, match=r"^client_cert and client_key must be given together$"):
        client_from_params({"host": "https://127.0.0.1:1", "api_key": "t", "client_cert": "/c.crt"})


def test_proxy_settings_reach_the_transport() -> None:
    client = client_from_params({"host": "https://127.0.0.1:1", "api_key": "t", "proxy": "http://127.0.0.1:3128"})
    assert isinstance(client.api_client.rest_client.pool_manager, urllib3.ProxyManager)
    client = client_from_params(
        {"host": "https://127.0.0.1:1", "api_key": "t", "proxy": "http://127.0.0.1:3128", "no_proxy": "127.0.0.1"}
    )
    assert not isinstance(client.api_client.rest_client.pool_manager, urllib3.ProxyManager)


def test_kubeconfig_secret_values() -> None:
    assert kubeconfig_secret_values(kubeconfig_dict()) >= {TOKEN, PASSWORD}
    assert "http://127.0.0.1:7001" not in kubeconfig_secret_values(kubeconfig_dict())
    assert kubeconfig_secret_values("/path") == set()


# ---------------------------------------------------------------------------------------
# Paths, verbs and messages
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "method, path, group, resource, namespace, name, verb",
    [
        ("GET", "/api/v1/nodes", "", "nodes", None, None, "list"),
        ("GET", "/api/v1/nodes/gpu-1", "", "nodes", None, "gpu-1", "get"),
        ("PATCH", "/api/v1/nodes/gpu-1", "", "nodes", None, "gpu-1", "patch"),
        ("GET", "/api/v1/pods?limit=500", "", "pods", None, None, "list"),
        ("GET", "/api/v1/namespaces/ml/pods", "", "pods", "ml", None, "list"),
        ("GET", "/api/v1/namespaces/ml/pods/train-0/log", "", "pods/log", "ml", "train-0", "get"),
        ("POST", "/apis/batch/v1/namespaces/ml/jobs", "batch", "jobs", "ml", None, "create"),
        ("DELETE", "/apis/batch/v1/namespaces/ml/jobs/j", "batch", "jobs", "ml", "j", "delete"),
        ("DELETE", "/apis/batch/v1/namespaces/ml/jobs", "batch", "jobs", "ml", None, "deletecollection"),
        (
            "PUT",
            "/apis/apps/v1/namespaces/kube-system/daemonsets/x/status",
            "apps",
            "daemonsets/status",
            "kube-system",
            "x",
            "update",
        ),
        ("GET", "/api/v1/namespaces", "", "namespaces", None, None, "list"),
        ("GET", "/api/v1/namespaces/ml", "", "namespaces", None, "ml", "get"),
    ],
)
def test_path_to_rbac_resource_and_verb(
    method: str, path: str, group: str, resource: str, namespace: str | None, name: str | None, verb: str
) -> None:
    target = parse_api_path(path)
    assert target is not None
    assert (target.group, target.rbac_resource, target.namespace, target.name) == (group, resource, namespace, name)
    assert rbac_verb(method, target) == verb


@pytest.mark.parametrize("path", ["/", "/api", "/api/v1", "/apis/apps/v1", "/version", "/healthz"])
def test_paths_that_name_no_resource(path: str) -> None:
    assert parse_api_path(path) is None


def test_403_names_verb_resource_scope_and_user() -> None:
    body = json.dumps(
        status_body(
            403,
            "Forbidden",
            'nodes is forbidden: User "system:serviceaccount:x:y" cannot list resource "nodes" in API group "" '
            "at the cluster scope",
        )
    )
    assert describe_api_error(403, "Forbidden", body, "GET", "/api/v1/nodes?limit=500") == (
        'forbidden: cannot list resource "nodes" at cluster scope; grant the verb "list" on "nodes" (apiGroup "") '
        'to user "system:serviceaccount:x:y"'
    )


def test_403_on_a_subresource_in_a_namespace() -> None:
    assert describe_api_error(403, "Forbidden", "", "GET", "/api/v1/namespaces/ml/pods/p/log") == (
        'forbidden: cannot get resource "pods/log" in namespace "ml"; grant the verb "get" on "pods/log" (apiGroup "")'
    )
    assert describe_api_error(403, None, None, "patch", "/apis/apps/v1/namespaces/ks/daemonsets/d") == (
        'forbidden: cannot patch resource "daemonsets" in namespace "ks"; '
        'grant the verb "patch" on "daemonsets" (apiGroup "apps")'
    )


def test_403_from_admission_is_not_blamed_on_rbac() -> None:
    message = 'pods "gpu" is forbidden: violates PodSecurity "restricted:latest": privileged'
    body = json.dumps(status_body(403, "Forbidden", message))
    assert describe_api_error(403, "Forbidden", body, "POST", "/api/v1/namespaces/ml/pods") == (
        f"forbidden (403 Forbidden) on POST /api/v1/namespaces/ml/pods: {message}"
    )


@pytest.mark.parametrize(
    "status, method, path, message, expected",
    [
        (
            401,
            "GET",
            "/api/v1/nodes",
            "Unauthorized",
            (
                "credentials rejected (401 Unauthorized) on GET /api/v1/nodes: the token, client certificate or "
                "kubeconfig user is not accepted by the API server (expired or revoked?)"
            ),
        ),
        (404, "GET", "/api/v1/nodes/gpu-9", 'nodes "gpu-9" not found', 'not found: nodes "gpu-9"'),
        (
            404,
            "GET",
            "/api/v1/namespaces/ml/pods/p/log",
            "x",
            'not found: pods "p" (subresource log) in namespace "ml"',
        ),
        (
            404,
            "GET",
            "/apis/nvidia.com/v1/clusterpolicies",
            "the server could not find the requested resource",
            'not found: resource "clusterpolicies" (nvidia.com/v1) is not served by this API server',
        ),
        (
            409,
            "PATCH",
            "/api/v1/nodes/n",
            "the object has been modified",
            "conflict (409 Conflict) on PATCH /api/v1/nodes/n: the object has been modified",
        ),
        (
            422,
            "POST",
            "/api/v1/namespaces/ml/pods",
            (
                'Pod "p" is invalid: spec.containers[0].resources.requests: Invalid value: "1": must be equal to '
                "nvidia.com/gpu limit of 0"
            ),
            (
                'invalid (422 Unprocessable Entity) on POST /api/v1/namespaces/ml/pods: Pod "p" is invalid: '
                'spec.containers[0].resources.requests: Invalid value: "1": must be equal to nvidia.com/gpu limit of 0'
            ),
        ),
        (
            429,
            "GET",
            "/api/v1/pods",
            "Too many requests, please try again later.",
            (
                "throttled by the API server (429 Too Many Requests) on GET /api/v1/pods: "
                "Too many requests, please try again later."
            ),
        ),
        (
            500,
            "GET",
            "/api/v1/pods",
            "etcdserver: request timed out",
            "API server error (500 Internal Server Error) on GET /api/v1/pods: etcdserver: request timed out",
        ),
        (
            400,
            "GET",
            "/api/v1/pods",
            "bad selector",
            "request failed (400 Bad Request) on GET /api/v1/pods: bad selector",
        ),
    ],
)
def test_api_error_messages(status: int, method: str, path: str, message: str, expected: str) -> None:
    body = json.dumps(status_body(status, "x", message))
    assert describe_api_error(status, None, body, method, path) == expected


def test_api_error_with_a_body_that_is_not_json() -> None:
    html = "<html><body>\n<h1>502 Bad Gateway</h1>\n" + "x" * 400 + "</body></html>"
    message = describe_api_error(502, "Bad Gateway", html, "GET", "/api/v1/nodes")
    assert message.startswith("API server error (502 Bad Gateway) on GET /api/v1/nodes: <html><body> <h1>502 Bad")
    assert message.endswith("...") and len(message) < 300


def test_connection_error_messages() -> None:
    host = "https://user:pw@api.example:6443"
    refused = urllib3.exceptions.NewConnectionError(
        None, "Failed to establish a new connection: [Errno 111] Connection refused"
    )
    refused.__cause__ = ConnectionRefusedError(111, "Connection refused")
    assert describe_connection_error(refused, host) == (
        "connection refused by the API server at https://api.example:6443: is it running, and are host and port right?"
    )
    dns = urllib3.exceptions.NameResolutionError("api.example", None, socket.gaierror(-2, "Name or service not known"))
    assert (
        describe_connection_error(dns, host) == 'cannot resolve the API server host "api.example" (DNS lookup failed)'
    )
    read = urllib3.exceptions.ReadTimeoutError(None, "/api/v1/pods", "Read timed out. (read timeout=30)")
    assert describe_connection_error(read, host, 30) == (
        "the API server at https://api.example:6443 did not answer within 30s (read timed out)"
    )
    connect = urllib3.exceptions.ConnectTimeoutError(None, "timed out")
    assert (
        describe_connection_error(connect, host) == "timed out connecting to the API server at https://api.example:6443"
    )
    verify = ssl.SSLCertVerificationError(
        1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: unable to get local issuer certificate"
    )
    verify.verify_message = "unable to get local issuer certificate"
    wrapped = urllib3.exceptions.SSLError(verify)
    assert describe_connection_error(wrapped, host) == (
        "TLS certificate verification failed for the API server at https://api.example:6443 (unable to get local "
        "issuer certificate); set ca_cert to the cluster's CA certificate (validate_certs: false skips the check, "
        "not recommended)"
    )


def test_proxy_credentials_never_reach_a_message() -> None:
    error = urllib3.exceptions.ProxyError(
        "Unable to connect to proxy", OSError("cannot reach http://proxyuser:proxypass@127.0.0.1:3128")
    )
    message = describe_connection_error(error, "https://127.0.0.1:6443")
    assert message == (
        "cannot reach the API server at https://127.0.0.1:6443 through the proxy: "
        "OSError: cannot reach http://127.0.0.1:3128"
    )


def test_retry_after_parsing_and_backoff() -> None:
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    assert parse_retry_after("Thu, 01 Jan 1970 00:00:10 GMT", now=4.0) == 6.0
    assert backoff_delay(0, 0.5, lambda: 0.0) == 0.25
    assert backoff_delay(3, 0.5, lambda: 1.0) == 4.0
    assert backoff_delay(30, 0.5, lambda: 1.0) == MAX_BACKOFF


@pytest.mark.parametrize(
    "method, status, retry",
    [
        ("GET", 429, True),
        ("GET", 500, True),
        ("GET", 504, True),
        ("GET", 501, False),
        ("GET", 409, False),
        ("PATCH", 503, True),
        ("DELETE", 502, True),
        ("POST", 429, True),
        ("POST", 503, True),
        ("POST", 500, False),
        ("POST", 502, False),
        ("POST", 504, False),
    ],
)
def test_which_statuses_are_retried(method: str, status: int, retry: bool) -> None:
    assert may_retry_status(method, status) is retry


# ---------------------------------------------------------------------------------------
# Requests against the canned server
# ---------------------------------------------------------------------------------------


def test_pagination_yields_every_item_and_counts_requests(api: FakeApi) -> None:
    api.add(
        "GET",
        "/api/v1/pods",
        Reply(body={"items": [{"n": 1}, {"n": 2}], "metadata": {"continue": "t1", "resourceVersion": "5"}}),
        Reply(body={"items": [{"n": 3}, {"n": 4}], "metadata": {"continue": "t2"}}),
        Reply(body={"items": [{"n": 5}], "metadata": {"continue": ""}}),
    )
    client, sleeps = make_client(api.url)
    items = client.list_items("/api/v1/pods", label_selector="app=x", field_selector="spec.nodeName=n", page_size=2)
    assert next(items) == {"n": 1}
    assert client.request_count in (1, 2)  # the next page may be on its way already, never more
    assert [item["n"] for item in items] == [2, 3, 4, 5]
    assert (client.request_count, client.write_count, sleeps) == (3, 0, [])
    assert [s.query.get("continue") for s in api.seen] == [None, ["t1"], ["t2"]]
    assert all(s.query["limit"] == ["2"] and s.query["labelSelector"] == ["app=x"] for s in api.seen)
    assert api.seen[0].query["fieldSelector"] == ["spec.nodeName=n"]


def test_the_next_page_is_fetched_while_the_caller_reads_this_one(api: FakeApi) -> None:
    api.add(
        "GET",
        "/api/v1/pods",
        Reply(body={"items": [{"n": 1}], "metadata": {"continue": "t1"}}),
        Reply(body={"items": [{"n": 2}], "metadata": {"continue": "t2"}}),
        Reply(body={"items": [{"n": 3}]}),
    )
    client, _sleeps = make_client(api.url)
    items = client.list_items("/api/v1/pods", page_size=1)
    assert next(items) == {"n": 1}
    deadline = time.monotonic() + 5
    while client.request_count < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert client.request_count == 2  # page 2 arrived while the caller held item 1, page 3 waits
    items.close()  # a caller that stops early leaves nothing running
    assert client.request_count == 2


def api_list(items: list[dict[str, Any]], token: str | None) -> bytes:
    """A page as the API server writes its built-in lists: kind, apiVersion and metadata before the items."""
    metadata = {"resourceVersion": "7", **({"continue": token, "remainingItemCount": 1} if token else {})}
    return json.dumps(
        {"kind": "PodList", "apiVersion": "v1", "metadata": metadata, "items": items}, separators=(",", ":")
    ).encode()


@pytest.mark.parametrize(
    ("page", "expected"),
    [
        (api_list([{"n": 1}], "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ"), (True, "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ")),
        (api_list([{"n": 1}], None), (True, None)),
        (b'{"kind":"PodList","apiVersion":"v1","metadata":{"continue":""},"items":[]}', (True, None)),
        # Custom resources' lists may come with the items first: the decoded page tells.
        (
            b'{"apiVersion":"ray.io/v1","items":[{"metadata":{"name":"r"}}],"kind":"RayClusterList","metadata":{}}',
            (False, None),
        ),
        (b'{"kind":"PodList","apiVersion":"v1","metadata":{"continue":"a\\u003cb"},"items":[]}', (False, None)),
        (b'{\n  "kind": "PodList",\n  "metadata": {"continue": "t"}}', (False, None)),
    ],
    ids=["built-in list", "last page", "empty token", "items first", "escaped token", "indented"],
)
def test_the_continue_token_is_read_from_the_head_only_when_it_is_certain(page: bytes, expected: tuple) -> None:
    assert continue_in_head(page) == expected


def test_pages_written_as_the_api_server_writes_them_are_read_ahead_before_decoding(api: FakeApi) -> None:
    api.add(
        "GET",
        "/api/v1/pods",
        Reply(body=api_list([{"n": 1}, {"n": 2}], "t1")),
        Reply(body=api_list([{"n": 3}], "t2")),
        Reply(body=api_list([{"n": 4}], None)),
    )
    client, _sleeps = make_client(api.url)
    assert [item["n"] for item in client.list_items("/api/v1/pods", page_size=2)] == [1, 2, 3, 4]
    assert [s.query.get("continue") for s in api.seen] == [None, ["t1"], ["t2"]]
    assert client.request_count == 3


def test_an_error_on_a_later_page_reaches_the_caller_there(api: FakeApi) -> None:
    api.add(
        "GET",
        "/api/v1/pods",
        Reply(body={"items": [{"n": 1}], "metadata": {"continue": "t1"}}),
        Reply(403, status_body(403, "Forbidden", 'pods is forbidden: User "u" cannot list resource "pods"')),
    )
    client, _sleeps = make_client(api.url)
    items = client.list_items("/api/v1/pods", page_size=1)
    assert next(items) == {"n": 1}
    with pytest.raises(ClusterError) as err:
        next(items)
    assert err.value.status == 403


@pytest.mark.parametrize("fast", [True, False], ids=["orjson", "stdlib"])
def test_decoding_gives_the_same_objects_either_way(monkeypatch: pytest.MonkeyPatch, fast: bool) -> None:
    if not fast:
        monkeypatch.setattr(client_module, "_fast_loads", None)
    assert (client_module._fast_loads is not None) is fast  # test-requirements.txt installs orjson
    text = rb'{"items": [{"n": 1, "q": "1.5", "big": 9223372036854775807, "u": "\u00e9"}]}'
    assert decode_json(text) == {"items": [{"n": 1, "q": "1.5", "big": 9223372036854775807, "u": "\u00e9"}]}


def test_requests_carry_credentials_and_impersonation(api: FakeApi) -> None:
    api.add("GET", "/api/v1/nodes/n", Reply(body={"metadata": {"name": "n"}}))
    client, _sleeps = make_client(api.url, impersonate_user="alice", impersonate_groups=["ops", "gpu-admins"])
    assert client.get("/api/v1/nodes/n", query={"pretty": False}) == {"metadata": {"name": "n"}}
    seen = api.seen[0]
    assert seen.headers["Authorization"] == f"Bearer {TOKEN}"
    assert seen.headers["Impersonate-User"] == "alice"
    assert seen.headers.get_all("Impersonate-Group") == ["ops", "gpu-admins"]
    assert seen.headers["Accept"] == "application/json"
    assert seen.query == {"pretty": ["false"]}


def test_429_retry_after_is_honoured_then_503_backs_off(api: FakeApi) -> None:
    api.add(
        "GET",
        "/api/v1/nodes",
        Reply(429, status_body(429, "TooManyRequests", "slow down"), {"Retry-After": "2"}),
        Reply(503, status_body(503, "ServiceUnavailable", "unavailable")),
        Reply(body={"items": [{"n": 1}]}),
    )
    client, sleeps = make_client(api.url)
    assert list(client.list_items("/api/v1/nodes")) == [{"n": 1}]
    assert client.request_count == 3
    assert 2.0 <= sleeps[0] <= 2.01  # Retry-After plus up to one backoff of jitter
    assert 0.01 <= sleeps[1] <= 0.02  # second attempt: backoff 0.01 * 2**1, half to all of it


def test_retry_after_is_capped(api: FakeApi) -> None:
    api.add("GET", "/api/v1/nodes", Reply(429, {}, {"Retry-After": "3600"}), Reply(body={"items": []}))
    client, sleeps = make_client(api.url)
    client.get("/api/v1/nodes")
    assert len(sleeps) == 1 and MAX_RETRY_AFTER <= sleeps[0] <= MAX_RETRY_AFTER + 0.01


def test_throttling_gets_a_larger_retry_budget_than_errors(api: FakeApi) -> None:
    throttled = Reply(429, status_body(429, "TooManyRequests", "slow down"), {"Retry-After": "0"})
    api.add("GET", "/api/v1/nodes", *([throttled] * THROTTLE_RETRIES), Reply(body={"items": []}))
    client, sleeps = make_client(api.url, retries=2)
    assert client.get("/api/v1/nodes") == {"items": []}
    assert client.request_count == THROTTLE_RETRIES + 1
    assert retry_budget(429, 0) == 0 and retry_budget(503, 2) == 2


def test_retries_are_bounded(api: FakeApi) -> None:
    api.add("GET", "/api/v1/nodes", Reply(503, status_body(503, "ServiceUnavailable", "apiserver is shutting down")))
    client, sleeps = make_client(api.url, retries=2)
    with pytest.raises(ClusterError) as err:
        client.get("/api/v1/nodes")
    assert err.value.status == 503
    assert err.value.message == (
        "API server error (503 Service Unavailable) on GET /api/v1/nodes: apiserver is shutting down; "
        "gave up after 3 attempts"
    )
    assert (client.request_count, len(sleeps)) == (3, 2)


def test_no_retry_on_client_errors(api: FakeApi) -> None:
    body = 'nodes is forbidden: User "system:serviceaccount:gpu:reader" cannot list resource "nodes" in API group ""'
    api.add("GET", "/api/v1/nodes", Reply(403, status_body(403, "Forbidden", body)))
    client, sleeps = make_client(api.url)
    with pytest.raises(ClusterError) as err:
        list(client.list_items("/api/v1/nodes"))
    assert err.value.status == 403
    assert err.value.message == (
        'forbidden: cannot list resource "nodes" at cluster scope; grant the verb "list" on "nodes" (apiGroup "") '
        'to user "system:serviceaccount:gpu:reader"'
    )
    assert (client.request_count, sleeps) == (1, [])


def test_expired_continue_token(api: FakeApi) -> None:
    api.add(
        "GET",
        "/api/v1/pods",
        Reply(body={"items": [{"n": 1}], "metadata": {"continue": "old"}}),
        Reply(410, status_body(410, "Expired", "The provided continue parameter is too old")),
    )
    client, _sleeps = make_client(api.url)
    items = client.list_items("/api/v1/pods")
    assert next(items) == {"n": 1}
    with pytest.raises(ClusterError) as err:
        next(items)
    assert err.value.status == 410
    assert err.value.message.startswith("the list of /api/v1/pods expired while it was being read (410 Gone")
    assert client.request_count == 2


def test_merge_patch_is_retried_and_counted_as_writes(api: FakeApi) -> None:
    api.add(
        "PATCH", "/api/v1/nodes/gpu-1", Reply(503, {}), Reply(body={"metadata": {"labels": {"accelerator": "a10"}}})
    )
    client, _sleeps = make_client(api.url)
    result = client.patch_merge("/api/v1/nodes/gpu-1", {"metadata": {"labels": {"accelerator": "a10", "old": None}}})
    assert result["metadata"]["labels"] == {"accelerator": "a10"}
    assert (client.request_count, client.write_count) == (2, 2)
    assert api.seen[0].headers["Content-Type"] == "application/merge-patch+json"
    assert json.loads(api.seen[1].body) == {"metadata": {"labels": {"accelerator": "a10", "old": None}}}


def test_create_is_retried_only_when_the_server_did_not_act(api: FakeApi) -> None:
    path = "/api/v1/namespaces/ml/pods"
    api.add("POST", path, Reply(429, {}, {"Retry-After": "0"}), Reply(503, {}), Reply(201, {"metadata": {"name": "p"}}))
    client, _sleeps = make_client(api.url)
    assert client.create(path, {"metadata": {"name": "p"}}) == {"metadata": {"name": "p"}}
    assert (client.request_count, client.write_count) == (3, 3)
    assert api.seen[0].headers["Content-Type"] == "application/json"

    api.add("POST", path, Reply(500, status_body(500, "InternalError", "boom")), Reply(201, {}))
    client, _sleeps = make_client(api.url)
    with pytest.raises(ClusterError) as err:
        client.create(path, {"metadata": {"name": "p"}})
    assert err.value.message == "API server error (500 Internal Server Error) on POST /api/v1/namespaces/ml/pods: boom"
    assert (client.request_count, client.write_count) == (1, 1)


def test_delete_of_a_missing_object_is_none(api: FakeApi) -> None:
    api.add("DELETE", "/api/v1/namespaces/ml/pods/gone", Reply(404, status_body(404, "NotFound", "not found")))
    api.add("DELETE", "/api/v1/namespaces/ml/pods/p", Reply(200, {"kind": "Pod"}))
    client, _sleeps = make_client(api.url)
    assert client.delete("/api/v1/namespaces/ml/pods/gone") is None
    assert client.delete("/api/v1/namespaces/ml/pods/p", query={"gracePeriodSeconds": 0}) == {"kind": "Pod"}
    assert api.seen[1].query == {"gracePeriodSeconds": ["0"]}
    assert client.write_count == 2


def test_read_text_and_get_of_a_missing_object(api: FakeApi) -> None:
    api.add("GET", "/api/v1/namespaces/ml/pods/p/log", Reply(body="step 1\nGPU 0: NVIDIA A10 ✓\n"))
    client, _sleeps = make_client(api.url)
    assert (
        client.read_text("/api/v1/namespaces/ml/pods/p/log", query={"tailLines": 5}) == "step 1\nGPU 0: NVIDIA A10 ✓\n"
    )
    assert api.seen[0].query == {"tailLines": ["5"]}
    with pytest.raises(ClusterError) as err:
        client.get("/api/v1/namespaces/ml/pods/q")
    assert (err.value.status, err.value.message) == (404, 'not found: pods "q" in namespace "ml"')


def test_a_body_that_is_not_json(api: FakeApi) -> None:
    api.add("GET", "/api/v1/nodes", Reply(200, "<html>login</html>"))
    client, _sleeps = make_client(api.url)
    with pytest.raises(
        ClusterError,
        match=r"GET /api/v1/nodes: the API server at http://127\.0\.0\.1:\d+ answered 200 "
        r"with a body that is not JSON",
    ):
        client.get("/api/v1/nodes")


def test_connection_refused_is_retried_and_never_shows_the_token() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    client, sleeps = make_client(url, retries=2)
    with pytest.raises(ClusterError) as err:
        client.get("/api/v1/nodes")
    assert err.value.message == (
        f"connection refused by the API server at {url}: is it running, and are host and port right?; "
        "gave up after 3 attempts"
    )
    assert err.value.status is None and TOKEN not in err.value.message
    assert (client.request_count, len(sleeps)) == (3, 2)
    # Nothing was sent, so a create may be retried too.
    with pytest.raises(ClusterError):
        client.create("/api/v1/namespaces/ml/pods", {})
    assert (client.request_count, client.write_count) == (6, 3)


def test_read_timeout_retries_reads_but_not_creates(api: FakeApi) -> None:
    api.add("GET", "/api/v1/nodes", Reply(delay=0.3))
    api.add("POST", "/api/v1/namespaces/ml/pods", Reply(201, {}, delay=0.3))
    client, _sleeps = make_client(api.url, retries=1, timeout=0.1)
    with pytest.raises(ClusterError) as err:
        client.get("/api/v1/nodes")
    assert err.value.message == (
        f"the API server at {api.url} did not answer within 0.1s (read timed out); gave up after 2 attempts"
    )
    assert client.request_count == 2
    with pytest.raises(ClusterError) as err:
        client.create("/api/v1/namespaces/ml/pods", {})
    assert err.value.message == f"the API server at {api.url} did not answer within 0.1s (read timed out)"
    assert (client.request_count, client.write_count) == (3, 1)


# ---------------------------------------------------------------------------------------
# TLS (a self-signed certificate made with openssl)
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if not shutil.which("openssl"):
        pytest.skip("openssl is not installed")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-days",
            "1",
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


@pytest.fixture
def tls_api(certificate: tuple[Path, Path]) -> Any:
    server = FakeApi()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(certificate[0]), str(certificate[1]))
    server.server.socket = context.wrap_socket(server.server.socket, server_side=True)
    server.url = server.url.replace("http://", "https://")
    server.add("GET", "/api/v1/nodes", Reply(body={"items": []}))
    server.start()
    yield server
    server.stop()


def test_tls_is_verified_by_default(tls_api: FakeApi, certificate: tuple[Path, Path]) -> None:
    client, sleeps = make_client(tls_api.url)
    with pytest.raises(ClusterError) as err:
        client.get("/api/v1/nodes")
    assert (client.request_count, sleeps) == (1, [])  # a certificate that fails verification fails again
    assert err.value.message == (
        f"TLS certificate verification failed for the API server at {tls_api.url} (self-signed certificate); "
        "set ca_cert to the cluster's CA certificate (validate_certs: false skips the check, not recommended)"
    )
    client, _sleeps = make_client(tls_api.url, ca_cert=str(certificate[0]))
    assert client.get("/api/v1/nodes") == {"items": []}
    client, _sleeps = make_client(tls_api.url, validate_certs=False)
    assert client.get("/api/v1/nodes") == {"items": []}


def test_tls_to_a_plain_http_server(api: FakeApi) -> None:
    url = api.url.replace("http://", "https://")
    client, _sleeps = make_client(url, retries=0)
    with pytest.raises(ClusterError) as err:
        client.get("/api/v1/nodes")
    assert err.value.message.startswith(f"TLS handshake with the API server at {url} failed: ")


def test_server_side_apply_sends_the_object_itself_with_the_installed_kubernetes_client(api: FakeApi) -> None:
    """kubernetes 30 JSON-encodes any apply-patch body, newer clients only a structured one: the API server must
    get the object either way, never a JSON string holding it (a 400 on every apply with kubernetes 30)."""
    path = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/p"
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "p"},
    }
    api.add("PATCH", path, Reply(body=policy))
    client, _sleeps = make_client(api.url)
    assert client.apply(path, policy, "kubegpu", dry_run=True) == policy
    [seen] = api.seen
    assert seen.headers["Content-Type"] == "application/apply-patch+yaml"
    assert json.loads(seen.body) == policy
    assert seen.query == {"fieldManager": ["kubegpu"], "force": ["true"], "dryRun": ["All"]}


# The body kube-apiserver answers an eviction with when the pod's budget allows no disruption
# (kubernetes pkg/registry/core/pod/storage/eviction.go, createTooManyRequestsError).
BUDGET_REFUSAL = json.dumps(
    {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Cannot evict pod as it would violate the pod's disruption budget.",
        "reason": "TooManyRequests",
        "details": {
            "causes": [
                {
                    "reason": "DisruptionBudget",
                    "message": "The disruption budget keep-serve needs 1 healthy pods and has 1 currently",
                }
            ]
        },
        "code": 429,
    }
)


def test_an_eviction_its_budget_refuses_is_named_a_refusal_not_throttling() -> None:
    path = "/api/v1/namespaces/ml/pods/serve/eviction"
    said = describe_api_error(429, "Too Many Requests", BUDGET_REFUSAL, "POST", path)
    assert said.startswith('refused by PodDisruptionBudget "keep-serve" (429 Too Many Requests) on POST ' + path)
    assert said.endswith(": The disruption budget keep-serve needs 1 healthy pods and has 1 currently")
    assert "throttled" not in said
    assert describe_api_error(429, "Too Many Requests", "", "GET", "/api/v1/nodes").startswith("throttled by the API")
