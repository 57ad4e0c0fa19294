"""Credentials against the local cluster: exec plugins that fail or work, a request that really
carries none, an OIDC token refreshed and written back (persist_config), headers for a proxy
(proxy_headers), and a pod without a service account token that falls back to its kubeconfig.

Exec plugins are shell scripts in the test's folder; the proxy and the OIDC issuer are servers the
test starts on 127.0.0.1. The ServiceAccount the credentials belong to lives in a namespace made
for the test, and its ClusterRoleBinding is deleted after.
"""

from __future__ import annotations

import base64
import json
import os
import re
import selectors
import shutil
import socket
import socketserver
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import CLUSTER_MODULE_CALLS, LocalCluster, ansible_env, fleet_facts, run_ansible_module

pytestmark = [pytest.mark.cluster, pytest.mark.every_release]

RBAC_API = "/apis/rbac.authorization.k8s.io/v1"
TRACEBACK = re.compile(r"Traceback \(most recent call last\)|MODULE FAILURE|module_stderr")
UNABLE = 'Unable to locate credentials. You can configure credentials by running "aws configure".'
EXEC_API = "client.authentication.k8s.io/v1beta1"
PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
PROXY_VARIABLES += ("NO_PROXY",)


# --- helpers ---------------------------------------------------------------------------------


def kubeconfig_with_user(cluster: LocalCluster, path: Path, user: dict[str, Any], name: str) -> Path:
    """The local cluster's kubeconfig with its user replaced."""
    config = json.loads(Path(cluster.kubeconfig).read_text())
    context = config["contexts"][0]["context"]
    config["users"] = [{"name": name, "user": user}]
    context["user"] = name
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


def plugin(folder: Path, name: str, body: str) -> Path:
    script = folder / name
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o700)
    return script


def exec_user(command: Path | str, **extra: Any) -> dict[str, Any]:
    return {"exec": {"apiVersion": EXEC_API, "command": str(command), **extra}}


def environment(kubeconfig: Path, **extra: str) -> dict[str, str]:
    env = ansible_env(kubeconfig, **extra)
    for name in PROXY_VARIABLES:
        env.pop(name, None)
    return env


def run(kubeconfig: Path, module: str, args: dict[str, Any], env: dict[str, str] | None = None) -> tuple[str, dict]:
    status, result, done = run_ansible_module(kubeconfig, module, args, env=env or environment(kubeconfig))
    output = done.stdout + done.stderr
    assert not TRACEBACK.search(output), output[-4000:]
    return status, result


def failure_message(status: str, result: dict) -> str:
    assert status == "FAILED!", result
    assert "exception" not in result, result.get("exception")
    message = result.get("msg")
    assert isinstance(message, str) and message and "\n" not in message, result
    return message


def create(cluster: LocalCluster, path: str, body: dict[str, Any]) -> dict[str, Any]:
    status, reply = cluster.create(path, body)
    assert status == 201 and isinstance(reply, dict), f"POST {path}: {status} {reply}"
    return reply


@pytest.fixture
def account_token(cluster: LocalCluster, namespace: str) -> Iterator[str]:
    """A token of a ServiceAccount that may do what every module does here (bound to cluster-admin:
    the tests are about how credentials are obtained, not about RBAC)."""
    name = "credentials"
    binding = f"kubegpu-credentials-{namespace}"
    create(
        cluster,
        f"/api/v1/namespaces/{namespace}/serviceaccounts",
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
    )
    create(
        cluster,
        f"{RBAC_API}/clusterrolebindings",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": binding},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        },
    )
    reply = create(
        cluster,
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}},
    )
    try:
        yield reply["status"]["token"]
    finally:
        cluster.delete(f"{RBAC_API}/clusterrolebindings/{binding}")


# --- exec plugins ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def failing_plugins(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    """Case -> (kubeconfig, what the one message must say)."""
    folder = tmp_path_factory.mktemp("failing-plugins")
    aws = plugin(folder, "aws", f"echo >&2\necho '{UNABLE}' >&2\nexit 255\n")
    hint = "Install gke-gcloud-auth-plugin for use with kubectl"
    return {
        "exit 255": (
            kubeconfig_with_user(cluster, folder / "eks", exec_user(aws, args=["eks", "get-token"]), "eks-admin"),
            f'getting credentials: exec plugin "{aws}" of kubeconfig user "eks-admin" failed with exit code 255: '
            f"{UNABLE}",
        ),
        "missing binary": (
            kubeconfig_with_user(
                cluster, folder / "gke", exec_user(folder / "gke-gcloud-auth-plugin", installHint=hint), "gke"
            ),
            f'getting credentials: exec plugin "{folder / "gke-gcloud-auth-plugin"}" of kubeconfig user "gke" was '
            f"not found: {folder / 'gke-gcloud-auth-plugin'} does not exist; {hint}",
        ),
    }


@pytest.mark.parametrize("module", sorted(CLUSTER_MODULE_CALLS))
def test_an_exec_plugin_that_exits_255_is_told_as_it_is_in_every_module(failing_plugins, module: str):
    kubeconfig, expected = failing_plugins["exit 255"]
    message = failure_message(*run(kubeconfig, module, CLUSTER_MODULE_CALLS[module]))
    assert expected in message
    assert "grant" not in message and "system:anonymous" not in message and "RBAC" not in message


def test_a_missing_plugin_binary_is_named(failing_plugins):
    kubeconfig, expected = failing_plugins["missing binary"]
    message = failure_message(*run(kubeconfig, "gpu_node_facts", {}))
    assert message.endswith(expected), message


def test_a_working_exec_plugin_reads_the_fleet(cluster: LocalCluster, account_token: str, tmp_path: Path):
    credential = {"apiVersion": EXEC_API, "kind": "ExecCredential", "status": {"token": account_token}}
    script = plugin(tmp_path, "get-token", f"cat <<'EOF'\n{json.dumps(credential)}\nEOF\n")
    kubeconfig = kubeconfig_with_user(cluster, tmp_path / "config", exec_user(script), "exec-user")
    status, result = run(kubeconfig, "gpu_node_facts", {})
    assert status == "SUCCESS", result
    assert fleet_facts(result)["nodes"], "the fleet has GPU nodes"
    assert account_token not in json.dumps(result)


def test_a_request_without_credentials_is_not_advised_rbac_for_anonymous(cluster: LocalCluster, tmp_path: Path):
    kubeconfig = kubeconfig_with_user(cluster, tmp_path / "config", {}, "nobody")
    message = failure_message(*run(kubeconfig, "gpu_node_facts", {}))
    assert "the request carried no credentials" in message, message
    assert "grant" not in message


# --- proxy_headers through a CONNECT proxy on 127.0.0.1 ---------------------------------------


class ConnectProxy:
    """An HTTP CONNECT proxy on 127.0.0.1 that records each CONNECT's headers and tunnels only to
    the one address it is given (the local API server)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.connects: list[dict[str, str]] = []
        proxy = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                request = self.rfile.readline().decode("latin-1").split()
                headers: dict[str, str] = {}
                for line in iter(self.rfile.readline, b"\r\n"):
                    if not line:
                        return
                    name, _colon, value = line.decode("latin-1").partition(":")
                    headers[name.strip().lower()] = value.strip()
                proxy.connects.append(headers)
                host, _colon, port = request[1].rpartition(":") if len(request) > 1 else ("", "", "0")
                if request[0] != "CONNECT" or (host, int(port)) != target:
                    self.wfile.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
                    return
                with socket.create_connection(target, timeout=30) as upstream:
                    self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    self.wfile.flush()
                    pipe(self.connection, upstream)

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def pipe(left: socket.socket, right: socket.socket) -> None:
    with selectors.DefaultSelector() as selector:
        selector.register(left, selectors.EVENT_READ, right)
        selector.register(right, selectors.EVENT_READ, left)
        while True:
            for key, _events in selector.select(timeout=30):
                data = key.fileobj.recv(65536)  # type: ignore[union-attr]
                if not data:
                    return
                key.data.sendall(data)


@pytest.fixture
def connect_proxy(cluster: LocalCluster) -> Iterator[ConnectProxy]:
    server = cluster.layout.server.split("://", 1)[1]
    host, _colon, port = server.rpartition(":")
    assert host == "127.0.0.1", server
    proxy = ConnectProxy((host, int(port)))
    yield proxy
    proxy.stop()


def basic(credentials: str) -> str:
    return "Basic " + base64.b64encode(credentials.encode()).decode()


def test_proxy_headers_reach_the_proxy_from_the_option(cluster: LocalCluster, connect_proxy: ConnectProxy):
    args = {
        "proxy": connect_proxy.url,
        "proxy_headers": {"user_agent": "platform-ci/1.0", "proxy_basic_auth": "ci:proxy-password"},
    }
    status, result = run(cluster.kubeconfig, "gpu_node_facts", args)
    assert status == "SUCCESS", result
    assert connect_proxy.connects, "the module did not go through the proxy"
    seen = connect_proxy.connects[0]
    assert seen["user-agent"] == "platform-ci/1.0"
    assert seen["proxy-authorization"] == basic("ci:proxy-password")
    assert "proxy-password" not in json.dumps(result)


def test_proxy_headers_reach_the_proxy_from_the_environment(cluster: LocalCluster, connect_proxy: ConnectProxy):
    env = environment(
        cluster.kubeconfig,
        K8S_AUTH_PROXY=connect_proxy.url,
        K8S_AUTH_PROXY_HEADERS_USER_AGENT="from-env/2.0",
        K8S_AUTH_PROXY_HEADERS_BASIC_AUTH="envuser:env-password",
    )
    status, result = run(cluster.kubeconfig, "gpu_node_facts", {}, env=env)
    assert status == "SUCCESS", result
    assert connect_proxy.connects, "the module did not go through the proxy"
    seen = connect_proxy.connects[0]
    assert (seen["user-agent"], seen["authorization"]) == ("from-env/2.0", basic("envuser:env-password"))
    assert "env-password" not in json.dumps(result)


# --- persist_config: an OIDC token refreshed from an issuer on 127.0.0.1 ---------------------


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def expired_jwt() -> str:
    claims = {"sub": "oidc-user", "exp": int(time.time()) - 3600}
    return ".".join(b64url(json.dumps(part).encode()) for part in ({"alg": "RS256"}, claims)) + "." + b64url(b"sig")


class Issuer:
    """An OIDC issuer on 127.0.0.1 with TLS: discovery, and a token endpoint that answers a
    refresh with the given id-token."""

    def __init__(self, folder: Path, id_token: str) -> None:
        cert, key = folder / "issuer.crt", folder / "issuer.key"
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
            + ["-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1"]
            + ["-addext", "subjectAltName=IP:127.0.0.1", "-days", "1"],
            check=True,
            capture_output=True,
        )
        self.ca = cert
        self.refreshes = 0
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _reply(self, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._reply({"issuer": issuer.url, "token_endpoint": issuer.url + "/token"})

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                issuer.refreshes += 1
                self._reply(
                    {
                        "access_token": "access",
                        "token_type": "Bearer",
                        "expires_in": 3600,
                        "id_token": id_token,
                        "refresh_token": f"rotated-refresh-{issuer.refreshes}",
                    }
                )

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(cert), str(key))
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def oidc_kubeconfig(cluster: LocalCluster, path: Path, issuer: Issuer) -> Path:
    user = {
        "auth-provider": {
            "name": "oidc",
            "config": {
                "client-id": "kubegpu",
                "client-secret": "oidc-client-secret",
                "id-token": expired_jwt(),
                "idp-issuer-url": issuer.url,
                "idp-certificate-authority": str(issuer.ca),
                "refresh-token": "first-refresh",
            },
        }
    }
    return kubeconfig_with_user(cluster, path, user, "oidc-user")


def stored_provider(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())["users"][0]["user"]["auth-provider"]["config"]


@pytest.mark.parametrize("persist", [True, False])
def test_persist_config_writes_the_refreshed_oidc_token_back(
    cluster: LocalCluster, account_token: str, tmp_path: Path, persist: bool
):
    if not shutil.which("openssl"):
        pytest.skip("openssl is not installed")
    issuer = Issuer(tmp_path, account_token)
    try:
        kubeconfig = oidc_kubeconfig(cluster, tmp_path / "config", issuer)
        before = stored_provider(kubeconfig)
        env = environment(kubeconfig, K8S_AUTH_PERSIST_CONFIG="true") if persist else None
        args = {} if persist else {"persist_config": False}
        status, result = run(kubeconfig, "gpu_node_facts", args, env=env)
    finally:
        issuer.stop()
    assert status == "SUCCESS", result
    assert issuer.refreshes == 1
    after = stored_provider(kubeconfig)
    if persist:
        assert (after["id-token"], after["refresh-token"]) == (account_token, "rotated-refresh-1")
        assert after["client-secret"] == "oidc-client-secret"
    else:
        assert after == before
    assert account_token not in json.dumps(result) and "oidc-client-secret" not in json.dumps(result)


# --- a pod without a service account token ----------------------------------------------------


def test_in_cluster_without_a_token_falls_back_to_KUBECONFIG(cluster: LocalCluster):
    if os.path.exists("/var/run/secrets/kubernetes.io/serviceaccount/token"):
        pytest.skip("this machine has a service account token mounted: the in-cluster configuration would load")
    port = cluster.layout.server.rsplit(":", 1)[1]
    env = environment(cluster.kubeconfig, KUBERNETES_SERVICE_HOST="127.0.0.1", KUBERNETES_SERVICE_PORT=port)
    env.pop("K8S_AUTH_KUBECONFIG")
    env["KUBECONFIG"] = str(cluster.kubeconfig)
    status, result = run(cluster.kubeconfig, "gpu_node_facts", {}, env=env)
    assert status == "SUCCESS", result
    assert fleet_facts(result)["nodes"]
