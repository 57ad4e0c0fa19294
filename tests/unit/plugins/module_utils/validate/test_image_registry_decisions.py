"""The registry read's decisions (image references, the index's linux/amd64 image, challenges, pull-secret
credentials, the verdict of a config's env) and its authentication: a bearer token from the challenge's
realm, basic credentials from a pull secret, each read within its budget. The real registry is in
tests/integration/test_image_registry_read.py; here a stdlib HTTP server plays one that asks for a token."""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.images import ImageCatalogue, NotRead
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.registry import (
    DOCKER_HUB_NAMES,
    DOCKER_HUB_REGISTRY,
    Challenge,
    ImageRef,
    RegistrySettings,
    config_env,
    docker_config_credentials,
    parse_challenge,
    parse_image,
    platform_manifest,
    registry_verdict,
    token_url,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.registry_reads import (
    RegistryReader,
    registry_reader,
    registry_settings,
)

HUB = DOCKER_HUB_REGISTRY


@pytest.mark.parametrize(
    ("image", "ref"),
    [
        ("nginx", ImageRef(HUB, "library/nginx", "latest")),
        ("docker.io/vllm/vllm-openai:v0.6.3", ImageRef(HUB, "vllm/vllm-openai", "v0.6.3")),
        ("localhost:5000/acme/train:1", ImageRef("localhost:5000", "acme/train", "1")),
        (
            "ghcr.io/huggingface/text-generation-inference:3.0.1",
            ImageRef("ghcr.io", "huggingface/text-generation-inference", "3.0.1"),
        ),
        ("127.0.0.1:5000/a/b@sha256:" + "0" * 64, ImageRef("127.0.0.1:5000", "a/b", "sha256:" + "0" * 64)),
        ("localhost/train", ImageRef("localhost", "train", "latest")),
    ],
)
def test_image_references(image, ref):
    assert parse_image(image) == ref


def test_the_linux_amd64_image_of_an_index():
    index = {
        "manifests": [
            {"digest": "sha256:a", "platform": {"os": "linux", "architecture": "arm64"}},
            {"digest": "sha256:b", "platform": {"os": "linux", "architecture": "amd64", "variant": "v3"}},
        ]
    }
    assert platform_manifest(index) == "sha256:b"
    assert (
        platform_manifest(
            {"manifests": [{"digest": "sha256:a", "platform": {"os": "windows", "architecture": "amd64"}}]}
        )
        is None
    )


def test_a_bearer_challenge_gives_the_token_url():
    challenge = parse_challenge('Bearer realm="https://auth.example.com/token",service="registry.example.com"')
    assert challenge == Challenge(
        "bearer", {"realm": "https://auth.example.com/token", "service": "registry.example.com"}
    )
    url = token_url(challenge, ImageRef("registry.example.com", "acme/train", "1"))
    assert url == "https://auth.example.com/token?service=registry.example.com&scope=repository%3Aacme%2Ftrain%3Apull"
    with pytest.raises(ValueError, match="not an http"):
        token_url(Challenge("bearer", {"realm": "file:///etc/passwd"}), ImageRef("r", "a", "1"))


def test_pull_secret_credentials_by_registry_host():
    auth = base64.b64encode(b"robot:s3cret").decode()
    data = {
        "auths": {
            f"https://{DOCKER_HUB_NAMES[1]}/v1/": {"auth": auth},
            "registry.example.com": {"username": "u", "password": "p"},
        }
    }
    assert docker_config_credentials(data, "f") == {HUB: ("robot", "s3cret"), "registry.example.com": ("u", "p")}
    with pytest.raises(OptionError, match="auths map"):
        docker_config_credentials({"credsStore": "x"}, "f")


def test_the_verdict_of_a_config_env():
    env = config_env({"config": {"Env": ["PATH=/bin", "NVIDIA_VISIBLE_DEVICES=all", "CUDA_VERSION=12.4.1"]}})
    verdict = registry_verdict(env, "r:5000", "sha256:abc")
    assert verdict.env == {"NVIDIA_VISIBLE_DEVICES": "all", "CUDA_VERSION": "12.4.1"}
    assert (
        verdict.source
        == "the image's config sets NVIDIA_VISIBLE_DEVICES=all, read from the registry r:5000, digest sha256:abc"
    )
    assert registry_verdict({"PATH": "/bin"}, "r", "sha256:abc") is None
    void = registry_verdict({"NVIDIA_VISIBLE_DEVICES": "void"}, "r", "sha256:abc")
    assert void.env == {"NVIDIA_VISIBLE_DEVICES": "void"}


def test_the_users_image_env_comes_before_the_registry_and_a_failed_read_keeps_the_name():
    catalogue = ImageCatalogue({"acme/train:1": {}}, reader=lambda image: NotRead("down"))
    assert catalogue.lookup("acme/train:1").source == "the image_env map"
    assert "official CUDA" in catalogue.lookup("nvidia/cuda:12.4.1-base-ubuntu22.04").source
    assert ImageCatalogue(reader=lambda image: None).lookup("nvidia/cuda:12.4.1-base-ubuntu22.04") is None


def test_the_option_is_off_by_default_and_checked(tmp_path):
    assert registry_reader({}) is None and registry_reader(None) is None
    with pytest.raises(OptionError, match="positive"):
        registry_settings({"read": True, "timeout": -1})
    bad = tmp_path / "config.json"
    bad.write_text("{", encoding="utf-8")
    with pytest.raises(OptionError, match="docker_config: cannot read"):
        registry_settings({"read": True, "docker_config": str(bad)})


# --- a registry that asks for a bearer token, or for basic credentials -----------------------------

CONFIG = json.dumps({"config": {"Env": ["NVIDIA_VISIBLE_DEVICES=all"]}}).encode()
CONFIG_DIGEST = "sha256:" + hashlib.sha256(CONFIG).hexdigest()
MANIFEST = json.dumps({"schemaVersion": 2, "config": {"digest": CONFIG_DIGEST}}).encode()
BASIC = "Basic " + base64.b64encode(b"robot:s3cret").decode()


class _Handler(BaseHTTPRequestHandler):
    scheme = "bearer"
    seen: list[tuple[str, str | None]] = []

    def log_message(self, *args):  # quiet
        pass

    def _send(self, code, body=b"", headers=()):
        self.send_response(code)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802
        auth = self.headers.get("Authorization")
        self.seen.append((self.path, auth))
        host = f"http://127.0.0.1:{self.server.server_port}"
        if self.path.startswith("/token"):
            if auth != BASIC:
                return self._send(401)
            return self._send(200, json.dumps({"token": "t0k"}).encode())
        wanted = "Bearer t0k" if self.scheme == "bearer" else BASIC
        if auth != wanted:
            challenge = f'Bearer realm="{host}/token",service="test"' if self.scheme == "bearer" else 'Basic realm="r"'
            return self._send(401, headers=[("WWW-Authenticate", challenge)])
        if self.path == "/v2/acme/train/manifests/1":
            return self._send(200, MANIFEST, [("Content-Type", "application/vnd.oci.image.manifest.v1+json")])
        if self.path == f"/v2/acme/train/blobs/{CONFIG_DIGEST}":
            return self._send(200, CONFIG)
        return self._send(404)


@pytest.fixture(scope="module")
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{httpd.server_port}"
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize("scheme", ["bearer", "basic"])
def test_a_registry_that_asks_for_credentials_gets_the_pull_secrets(server, scheme, monkeypatch):
    monkeypatch.setattr(_Handler, "scheme", scheme)
    monkeypatch.setattr(_Handler, "seen", [])
    settings = RegistrySettings(read=True, insecure_registries=(server,), credentials={server: ("robot", "s3cret")})
    reader = RegistryReader(settings)
    verdict = reader(f"{server}/acme/train:1")
    assert verdict.env == {"NVIDIA_VISIBLE_DEVICES": "all"} and CONFIG_DIGEST in verdict.source
    assert reader.notes == []
    paths = [path for path, _auth in _Handler.seen]
    if scheme == "bearer":
        assert paths[1].startswith("/token?service=test&scope=repository%3Aacme%2Ftrain%3Apull")
    # The token is kept for the repository: the blob read asks once.
    assert paths[-1] == f"/v2/acme/train/blobs/{CONFIG_DIGEST}" and paths.count(paths[-1]) == 1


def test_without_credentials_a_protected_registry_is_a_note(server, monkeypatch):
    monkeypatch.setattr(_Handler, "scheme", "basic")
    reader = RegistryReader(RegistrySettings(read=True, insecure_registries=(server,)))
    assert isinstance(reader(f"{server}/acme/train:1"), NotRead)
    (note,) = reader.notes
    assert f"could not be read from the registry {server} (HTTP 401" in note and "s3cret" not in note


def test_a_spent_budget_reads_nothing_more(server, monkeypatch):
    monkeypatch.setattr(_Handler, "scheme", "bearer")
    reader = RegistryReader(RegistrySettings(read=True, insecure_registries=(server,), budget=1e-9))
    assert isinstance(reader(f"{server}/acme/train:1"), NotRead)
    assert "budget of 1e-09 s is spent" in reader.notes[0] and reader.requests == 0
