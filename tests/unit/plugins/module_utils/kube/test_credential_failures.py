"""Credentials that fail to load, told as they are, and the connection options of kubernetes.core
that shape the transport: proxy_headers, persist_config and the in-cluster fallback.

Exec plugins are small shell scripts written into tmp_path; the API server and the OIDC issuer
are tiny servers on 127.0.0.1. Nothing else is contacted.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import shutil
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import urllib3
import yaml
from test_client import clean_env, mount_service_account  # noqa: F401  # pylint: disable=unused-import  # the same clean environment for every test here

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient, client_from_params
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.config import (
    credential_failure,
    k8s_config,
    kubeconfig_secret_values,
    resolve_auth_params,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import (
    ClusterError,
    CredentialError,
    OptionError,
    describe_api_error,
    describe_exec_failure,
    stderr_tail,
)

TOKEN = "exec-issued-token-value"
UNABLE = 'Unable to locate credentials. You can configure credentials by running "aws configure".'


# ---------------------------------------------------------------------------------------
# A recording HTTP server on 127.0.0.1 (the API server, or an OIDC issuer with TLS)
# ---------------------------------------------------------------------------------------


class Server:
    """Answers (method, path) with a fixed (status, JSON body) and records every request."""

    def __init__(self, routes: dict[tuple[str, str], tuple[int, Any]], tls: tuple[Path, Path] | None = None) -> None:
        self.routes = routes
        self.seen: list[tuple[str, str, dict[str, str]]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                path = self.path.split("?", 1)[0]
                server.seen.append((self.command, path, dict(self.headers)))
                status, body = server.routes.get((self.command, path), (404, {"kind": "Status", "code": 404}))
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _handle

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        scheme = "http"
        if tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(str(tls[0]), str(tls[1]))
            self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def api() -> Iterator[Server]:
    server = Server({("GET", "/api/v1/nodes"): (200, {"kind": "NodeList", "items": []})})
    yield server
    server.stop()


def kubeconfig(server: str, user: dict[str, Any], name: str = "someone") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": {"server": server}}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": name}}],
        "current-context": "local",
    }


def write_kubeconfig(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def exec_user(command: Path | str, **extra: Any) -> dict[str, Any]:
    return {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": str(command), **extra}}


def plugin(folder: Path, name: str, body: str) -> Path:
    """An exec credential plugin: a shell script in the test's folder."""
    script = folder / name
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return script


def exec_credential(token: str, expires: str | None = None) -> str:
    status: dict[str, Any] = {"token": token}
    if expires:
        status["expirationTimestamp"] = expires
    return json.dumps(
        {"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential", "status": status}
    )


def load_failure(kubeconfig_value: Any, **params: Any) -> str:
    with pytest.raises(CredentialError) as err:
        client_from_params({"kubeconfig": kubeconfig_value, **params})
    assert err.value.status is None
    assert "\n" not in err.value.message
    return err.value.message


# ---------------------------------------------------------------------------------------
# Exec credential plugins
# ---------------------------------------------------------------------------------------


def test_a_plugin_that_exits_255_is_named_with_its_exit_code_and_stderr(
    tmp_path: Path, api: Server, capfd: pytest.CaptureFixture[str]
) -> None:
    aws = plugin(
        tmp_path, "aws", f"echo '{exec_credential('leaked-stdout-token')}'\necho >&2\necho '{UNABLE}' >&2\nexit 255\n"
    )
    handlers = list(logging.getLogger().handlers)
    message = load_failure(kubeconfig(api.url, exec_user(aws, args=["eks", "get-token"]), name="eks-admin"))
    assert message == (
        f'getting credentials: exec plugin "{aws}" of kubeconfig user "eks-admin" failed with exit code 255: {UNABLE}'
    )
    assert "grant" not in message and "anonymous" not in message
    assert "leaked-stdout-token" not in message
    assert api.seen == [], "no request is sent without the credentials"
    assert UNABLE not in capfd.readouterr().err, "the library's log line reached stderr"
    assert logging.getLogger().handlers == handlers


def test_a_plugin_file_in_a_kubeconfig_file_fails_the_same(tmp_path: Path, api: Server) -> None:
    aws = plugin(tmp_path, "aws", f"echo '{UNABLE}' >&2\nexit 255\n")
    path = write_kubeconfig(tmp_path / "config", kubeconfig(api.url, exec_user(aws)))
    assert "failed with exit code 255: Unable to locate credentials." in load_failure(str(path))


def test_a_missing_plugin_binary_names_it_and_the_install_hint(
    tmp_path: Path, api: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    hint = "Install gke-gcloud-auth-plugin for use with kubectl by following\n  the GKE documentation"
    message = load_failure(kubeconfig(api.url, exec_user("gke-gcloud-auth-plugin", installHint=hint), name="gke"))
    assert message == (
        'getting credentials: exec plugin "gke-gcloud-auth-plugin" of kubeconfig user "gke" was not found: '
        "no executable gke-gcloud-auth-plugin on PATH; Install gke-gcloud-auth-plugin for use with kubectl by "
        "following the GKE documentation"
    )


def test_a_plugin_that_cannot_be_run(tmp_path: Path, api: Server) -> None:
    script = plugin(tmp_path, "kubelogin", "exit 0\n")
    script.chmod(0o644)
    message = load_failure(kubeconfig(api.url, exec_user(script)))
    assert message.endswith(f"cannot be run: permission denied (is {script} executable?)")


@pytest.mark.parametrize(
    "body, problem",
    [
        ("echo 'not json'\n", "gave no usable ExecCredential: failed to decode process output: Expecting value"),
        (
            'echo \'{"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential", "status": {}}\'\n',
            "gave no usable ExecCredential: missing token or clientCertificateData field in plugin output",
        ),
        (
            'echo \'{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", '
            '"status": {"token": "x"}}\'\n',
            "gave no usable ExecCredential: plugin api version client.authentication.k8s.io/v1 does not match",
        ),
        ("kill -9 $$\n", "was killed by signal 9 and printed nothing on stderr"),
        ("exit 1\n", "failed with exit code 1 and printed nothing on stderr"),
    ],
)
def test_a_plugin_that_gives_no_credentials(tmp_path: Path, api: Server, body: str, problem: str) -> None:
    script = plugin(tmp_path, "cred", body)
    message = load_failure(kubeconfig(api.url, exec_user(script)))
    assert message.startswith(f'getting credentials: exec plugin "{script}" of kubeconfig user "someone" {problem}')


def test_a_working_plugin_authenticates_every_request(tmp_path: Path, api: Server) -> None:
    script = plugin(tmp_path, "cred", f"echo '{exec_credential(TOKEN)}'\n")
    client = client_from_params({"kubeconfig": kubeconfig(api.url, exec_user(script))})
    assert client.get("/api/v1/nodes")["kind"] == "NodeList"
    assert api.seen[-1][2]["Authorization"] == f"Bearer {TOKEN}"


def test_a_plugin_that_fails_when_its_token_expires_stops_the_next_request(tmp_path: Path, api: Server) -> None:
    # The first run gives a token that is already within the library's refresh margin; the next
    # run, when the first request reads the token, fails.
    ran = tmp_path / "ran"
    soon = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 60))
    script = plugin(
        tmp_path,
        "cred",
        f"if [ -e {ran} ]; then echo 'token expired; log in again' >&2; exit 3; fi\n"
        f"touch {ran}\necho '{exec_credential(TOKEN, soon)}'\n",
    )
    client = client_from_params({"kubeconfig": kubeconfig(api.url, exec_user(script))})
    for _attempt in range(2):
        with pytest.raises(CredentialError) as err:
            client.get("/api/v1/nodes")
        assert err.value.message.endswith("failed with exit code 3: token expired; log in again")
    assert api.seen == []


def test_a_token_in_the_user_wins_over_its_exec_plugin(tmp_path: Path, api: Server) -> None:
    user = {"token": TOKEN, **exec_user(tmp_path / "never-run")}
    client = client_from_params({"kubeconfig": kubeconfig(api.url, user)})
    client.get("/api/v1/nodes")
    assert api.seen[-1][2]["Authorization"] == f"Bearer {TOKEN}"


def test_the_end_of_a_long_stderr_is_kept() -> None:
    lines = [f"line {n}: " + "x" * 20 for n in range(40)]
    tail = stderr_tail("\n".join(lines) + "\n\n")
    assert tail == " ".join(lines[-5:])
    huge = stderr_tail("y" * 5000 + "END")
    assert huge.startswith("...") and huge.endswith("END") and len(huge) == 403


def test_a_missing_plugin_given_by_path() -> None:
    logged = "[Errno 2] No such file or directory: '/opt/bin/aws'"
    assert describe_exec_failure("/opt/bin/aws", "u", logged) == (
        'getting credentials: exec plugin "/opt/bin/aws" of kubeconfig user "u" was not found: /opt/bin/aws does not exist'
    )


def test_exec_failure_wording() -> None:
    logged = "exec: process returned 255. An error occurred (ExpiredToken)\nwhen calling GetCallerIdentity"
    assert describe_exec_failure("aws", "u", logged) == (
        'getting credentials: exec plugin "aws" of kubeconfig user "u" failed with exit code 255: '
        "An error occurred (ExpiredToken) when calling GetCallerIdentity"
    )
    assert describe_exec_failure("aws", "u", None).endswith("gave neither a token nor a client certificate")
    assert describe_exec_failure("aws", "u", "[Errno 2] No such file or directory: '/gone'").endswith(
        "failed: [Errno 2] No such file or directory: '/gone'"
    )


def test_the_exec_decision_follows_the_library_order() -> None:
    user = exec_user("aws")
    assert credential_failure("u", user, [], loaded=True, token=TOKEN, now=0) is None
    assert "gave neither" in (credential_failure("u", user, [], loaded=False, token=None, now=0) or "")
    assert credential_failure("u", {**user, "token": TOKEN}, [], loaded=True, token=TOKEN, now=0) is None
    assert credential_failure("u", {"token": TOKEN}, ["something"], loaded=True, token=TOKEN, now=0) is None


def test_a_dict_kubeconfig_masks_plugin_arguments_but_not_the_plugin_or_user() -> None:
    data = kubeconfig("http://127.0.0.1:1", exec_user("/usr/local/bin/aws", args=["--secret-arg", "s3cr3t-arg"]))
    data["users"][0]["user"]["exec"]["env"] = [{"name": "AWS_SECRET", "value": "env-secret-value"}]
    secrets = kubeconfig_secret_values(data)
    assert {"--secret-arg", "s3cr3t-arg", "AWS_SECRET", "env-secret-value"} <= secrets
    assert "/usr/local/bin/aws" not in secrets and "someone" not in secrets
    assert "client.authentication.k8s.io/v1beta1" not in secrets


# ---------------------------------------------------------------------------------------
# A request that really reaches the API server without credentials
# ---------------------------------------------------------------------------------------

ANONYMOUS_403 = json.dumps(
    {
        "kind": "Status",
        "status": "Failure",
        "reason": "Forbidden",
        "code": 403,
        "message": 'nodes is forbidden: User "system:anonymous" cannot list resource "nodes" in API group "" '
        "at the cluster scope",
    }
)


def test_anonymous_is_told_as_no_credentials_never_as_rbac() -> None:
    message = describe_api_error(403, "Forbidden", ANONYMOUS_403, "GET", "/api/v1/nodes", credentials_sent=False)
    assert message == (
        "forbidden (403 Forbidden) on GET /api/v1/nodes: the request carried no credentials, so the API server "
        'treated it as "system:anonymous"; give a kubeconfig user, api_key, or client_cert and client_key'
    )
    sent = describe_api_error(403, "Forbidden", ANONYMOUS_403, "GET", "/api/v1/nodes", credentials_sent=True)
    assert "did not recognise the credentials sent" in sent
    for text in (message, sent):
        assert "grant" not in text
    assert describe_api_error(401, None, "{}", "GET", "/api/v1/nodes", credentials_sent=False) == (
        "unauthenticated (401 Unauthorized) on GET /api/v1/nodes: the request carried no credentials, and the "
        "API server requires them; give a kubeconfig user, api_key, or client_cert and client_key"
    )


def test_the_client_says_whether_the_request_carried_credentials() -> None:
    server = Server({("GET", "/api/v1/nodes"): (403, json.loads(ANONYMOUS_403))})
    try:
        client = client_from_params({"host": server.url}, retries=0)
        with pytest.raises(ClusterError) as err:
            client.get("/api/v1/nodes")
        assert "the request carried no credentials" in err.value.message
        client = client_from_params({"host": server.url, "api_key": TOKEN}, retries=0)
        with pytest.raises(ClusterError) as err:
            client.get("/api/v1/nodes")
        assert "did not recognise the credentials sent" in err.value.message
    finally:
        server.stop()


# ---------------------------------------------------------------------------------------
# OIDC auth-provider: refresh, its failures, and persist_config
# ---------------------------------------------------------------------------------------


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt(expires: float, subject: str = "oidc-user") -> str:
    header = b64url(json.dumps({"alg": "RS256", "typ": "JWT"}).encode())
    claims = b64url(json.dumps({"sub": subject, "exp": int(expires)}).encode())
    return f"{header}.{claims}.{b64url(b'signature')}"


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if not shutil.which("openssl"):
        pytest.skip("openssl is not installed")
    folder = tmp_path_factory.mktemp("idp-tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        + ["-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1"]
        + ["-addext", "subjectAltName=IP:127.0.0.1", "-days", "1"],
        check=True,
        capture_output=True,
    )
    return cert, key


NEW_ID_TOKEN = jwt(time.time() + 3600, "refreshed")


def issuer(certificate: tuple[Path, Path], token_reply: tuple[int, Any], discovery: int = 200) -> Server:
    server = Server({}, tls=certificate)
    server.routes[("GET", "/.well-known/openid-configuration")] = (
        discovery,
        {"issuer": server.url, "token_endpoint": server.url + "/token"},
    )
    server.routes[("POST", "/token")] = token_reply
    return server


REFRESHED = (
    200,
    {
        "access_token": "access",
        "token_type": "Bearer",
        "expires_in": 3600,
        "id_token": NEW_ID_TOKEN,
        "refresh_token": "new-refresh-token",
    },
)


def oidc_user(issuer_url: str, ca: Path, id_token: str) -> dict[str, Any]:
    return {
        "auth-provider": {
            "name": "oidc",
            "config": {
                "client-id": "kubegpu",
                "client-secret": "client-secret-value",
                "id-token": id_token,
                "idp-issuer-url": issuer_url,
                "idp-certificate-authority": str(ca),
                "refresh-token": "old-refresh-token",
            },
        }
    }


def provider_config(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())["users"][0]["user"]["auth-provider"]["config"]


@pytest.mark.parametrize("persist", [False, True])
def test_an_expired_oidc_token_is_refreshed_and_written_back_only_with_persist_config(
    tmp_path: Path, api: Server, certificate: tuple[Path, Path], persist: bool
) -> None:
    idp = issuer(certificate, REFRESHED)
    try:
        expired = jwt(time.time() - 3600)
        path = write_kubeconfig(tmp_path / "config", kubeconfig(api.url, oidc_user(idp.url, certificate[0], expired)))
        client = client_from_params({"kubeconfig": str(path), "persist_config": persist})
        client.get("/api/v1/nodes")
    finally:
        idp.stop()
    assert api.seen[-1][2]["Authorization"] == f"Bearer {NEW_ID_TOKEN}"
    stored = provider_config(path)
    if persist:
        assert (stored["id-token"], stored["refresh-token"]) == (NEW_ID_TOKEN, "new-refresh-token")
        assert stored["client-secret"] == "client-secret-value"
    else:
        assert (stored["id-token"], stored["refresh-token"]) == (expired, "old-refresh-token")


def test_persist_config_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("K8S_AUTH_PERSIST_CONFIG", "yes")
    assert resolve_auth_params({})["persist_config"] is True
    assert resolve_auth_params({"persist_config": False})["persist_config"] is False
    monkeypatch.setenv("K8S_AUTH_PERSIST_CONFIG", "sometimes")
    with pytest.raises(ClusterError, match=r"^K8S_AUTH_PERSIST_CONFIG: 'sometimes' is not a boolean"):
        resolve_auth_params({})


def test_an_oidc_issuer_that_refuses_the_refresh_token(
    tmp_path: Path, api: Server, certificate: tuple[Path, Path]
) -> None:
    idp = issuer(certificate, (400, {"error": "invalid_grant", "error_description": "Token is not active"}))
    try:
        user = oidc_user(idp.url, certificate[0], jwt(time.time() - 60))
        message = load_failure(kubeconfig(api.url, user, name="dex"))
    finally:
        idp.stop()
    assert message == (
        f'getting credentials: refreshing the oidc token of kubeconfig user "dex" at {idp.url} failed: '
        "InvalidGrantError: (invalid_grant) Token is not active"
    )
    assert "old-refresh-token" not in message and "client-secret-value" not in message
    assert api.seen == []


def test_an_oidc_issuer_that_cannot_be_reached(tmp_path: Path, api: Server, certificate: tuple[Path, Path]) -> None:
    idp = issuer(certificate, REFRESHED)
    idp.stop()
    message = load_failure(kubeconfig(api.url, oidc_user(idp.url, certificate[0], jwt(time.time() - 60))))
    assert message.startswith(
        f'getting credentials: refreshing the oidc token of kubeconfig user "someone" at {idp.url}'
    )
    assert message.endswith("ConnectionRefusedError: [Errno 111] Connection refused")


def test_an_oidc_issuer_without_discovery_leaves_an_expired_token(
    tmp_path: Path, api: Server, certificate: tuple[Path, Path]
) -> None:
    idp = issuer(certificate, REFRESHED, discovery=404)
    try:
        message = load_failure(kubeconfig(api.url, oidc_user(idp.url, certificate[0], jwt(time.time() - 60))))
    finally:
        idp.stop()
    assert message == (
        f'getting credentials: the OIDC id-token of kubeconfig user "someone" has expired and the issuer {idp.url} '
        "gave no new one (check idp-issuer-url, client-id, client-secret and refresh-token of its auth-provider)"
    )


def test_a_valid_oidc_token_is_used_without_the_issuer(tmp_path: Path, api: Server) -> None:
    token = jwt(time.time() + 3600)
    client = client_from_params({"kubeconfig": kubeconfig(api.url, oidc_user("https://127.0.0.1:1", tmp_path, token))})
    client.get("/api/v1/nodes")
    assert api.seen[-1][2]["Authorization"] == f"Bearer {token}"


# ---------------------------------------------------------------------------------------
# proxy_headers
# ---------------------------------------------------------------------------------------


def test_proxy_headers_from_the_option_and_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("K8S_AUTH_PROXY_HEADERS_USER_AGENT", "from-env/1.0")
    monkeypatch.setenv("K8S_AUTH_PROXY_HEADERS_PROXY_BASIC_AUTH", "envuser:envpass")
    auth = resolve_auth_params({"proxy_headers": {"user_agent": "ci/2.0", "basic_auth": None}})
    assert auth["proxy_headers"] == {"user_agent": "ci/2.0", "proxy_basic_auth": "envuser:envpass"}
    monkeypatch.delenv("K8S_AUTH_PROXY_HEADERS_USER_AGENT")
    monkeypatch.delenv("K8S_AUTH_PROXY_HEADERS_PROXY_BASIC_AUTH")
    assert resolve_auth_params({})["proxy_headers"] is None


@pytest.mark.parametrize(
    "value, message",
    [
        ("ci/1.0", "proxy_headers must be a dict with any of proxy_basic_auth, basic_auth, user_agent"),
        ({"accept": "x"}, "proxy_headers: unknown key(s) accept; known: proxy_basic_auth, basic_auth, user_agent"),
        ({"proxy_basic_auth": "only-a-secret"}, "proxy_headers.proxy_basic_auth must be username:password"),
    ],
)
def test_bad_proxy_headers_are_named_without_their_value(value: Any, message: str) -> None:
    with pytest.raises(OptionError) as err:
        resolve_auth_params({"proxy_headers": value})
    assert err.value.message.startswith(message)
    assert "only-a-secret" not in err.value.message


def test_proxy_headers_reach_the_proxy_manager() -> None:
    client: KubeClient = client_from_params(
        {
            "host": "https://127.0.0.1:1",
            "api_key": TOKEN,
            "proxy": "http://127.0.0.1:3128",
            "proxy_headers": {"user_agent": "ci/2.0", "proxy_basic_auth": "user:pass"},
        }
    )
    manager = client.api_client.rest_client.pool_manager
    assert isinstance(manager, urllib3.ProxyManager)
    expected = {"user-agent": "ci/2.0", "proxy-authorization": "Basic " + base64.b64encode(b"user:pass").decode()}
    assert manager.proxy_headers == expected


# ---------------------------------------------------------------------------------------
# In a pod without a service account token: the kubeconfig, as kubernetes.core does
# ---------------------------------------------------------------------------------------


def test_in_cluster_without_a_token_falls_back_to_the_kubeconfig(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, api: Server
) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "6443")
    monkeypatch.setattr(k8s_config.incluster_config, "SERVICE_TOKEN_FILENAME", str(tmp_path / "no-token"))
    path = write_kubeconfig(tmp_path / "config", kubeconfig(api.url, {"token": TOKEN}))
    monkeypatch.setenv("KUBECONFIG", str(path))
    client = client_from_params({})
    assert client.host == api.url
    client.get("/api/v1/nodes")
    assert api.seen[-1][2]["Authorization"] == f"Bearer {TOKEN}"


def test_in_cluster_with_a_token_wins_over_the_kubeconfig(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    mount_service_account(monkeypatch, tmp_path)
    monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "config", kubeconfig("http://127.0.0.1:9", {}))))
    assert client_from_params({}).host == "https://127.0.0.1:6443"


def test_no_secret_of_the_environment_reaches_a_credential_message(tmp_path: Path, api: Server) -> None:
    script = plugin(tmp_path, "cred", 'echo "$SECRET_FOR_PLUGIN" > /dev/null\necho "denied" >&2\nexit 4\n')
    user = exec_user(script, env=[{"name": "SECRET_FOR_PLUGIN", "value": "plugin-env-secret"}])
    message = load_failure(kubeconfig(api.url, user))
    assert message.endswith("failed with exit code 4: denied")
    assert "plugin-env-secret" not in message
    assert os.environ.get("SECRET_FOR_PLUGIN") is None
