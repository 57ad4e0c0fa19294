"""The validator's optional read of an image's own config from its registry, against a real OCI registry:
Debian's docker-registry (distribution 2.8.2, /usr/bin/docker-registry) on 127.0.0.1, on a free port, its
storage in a temporary directory, basic auth (htpasswd, bcrypt) on every request, which each read answers
with a pull secret's credentials. The test pushes images through the registry API (a config blob and an
empty layer, then the manifest): one whose config sets NVIDIA_VISIBLE_DEVICES=all, one whose config sets
nothing under a name that says CUDA, and an index whose linux/amd64 image sets the variable (its arm64
image does not). Pods are judged by tag and by digest, and with the registry stopped.
Not a cluster test: it starts its own service, as the Prometheus harness tests do."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.checker import RuleConfig
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.cli import run as cli_run
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.documents import validate_documents
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.manifests import Document
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.registry import RegistrySettings
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.registry_reads import RegistryReader
from tests.unit.plugins.modules.test_gpu_pod_validate import run_module

REGISTRY_BIN = Path("/usr/bin/docker-registry")
USER, PASSWORD = "robot", "pull-only-test-password"
BASIC = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
# An empty tar (its two zero end blocks), gzipped: the layer every test image carries.
EMPTY_LAYER = gzip.compress(bytes(1024), mtime=0)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class Registry:
    """A running docker-registry and the images the test pushed to it."""

    with_var = ""  # the manifest digest of the image whose config sets NVIDIA_VISIBLE_DEVICES=all

    def __init__(self, root: Path) -> None:
        if not REGISTRY_BIN.is_file():
            pytest.fail(
                f"{REGISTRY_BIN} is missing: install Debian's docker-registry package "
                "(apt-get install docker-registry), a test prerequisite in the README"
            )
        self.sizes: dict[str, int] = {}
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        htpasswd = root / "htpasswd"
        hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()
        htpasswd.write_text(f"{USER}:{hashed}\n", encoding="utf-8")
        config = root / "config.yml"
        config.write_text(
            "version: 0.1\n"
            "log: {level: error, accesslog: {disabled: true}}\n"
            f"storage: {{filesystem: {{rootdirectory: {root / 'storage'}}}}}\n"
            f"auth: {{htpasswd: {{realm: kubegpu-test, path: {htpasswd}}}}}\n"
            f"http: {{addr: {self.host}}}\n",
            encoding="utf-8",
        )
        self.process = subprocess.Popen(
            [str(REGISTRY_BIN), "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        self.wait_ready()

    def wait_ready(self, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                err = self.process.stderr.read().decode() if self.process.stderr else ""
                pytest.fail(f"docker-registry exited with {self.process.returncode}: {err}")
            try:
                with urllib.request.urlopen(f"http://{self.host}/v2/", timeout=1):
                    pass
            except urllib.error.HTTPError as exc:
                if exc.code == 401:  # up, and asking for credentials
                    return
            except OSError:
                time.sleep(0.05)
        pytest.fail(f"docker-registry did not answer on {self.host} within {timeout} s")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def _request(self, method: str, url: str, data: bytes, content_type: str) -> urllib.request.addinfourl:
        headers = {"Content-Type": content_type, "Authorization": BASIC}
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        return urllib.request.urlopen(request, timeout=10)

    def push_blob(self, name: str, data: bytes) -> str:
        digest = digest_of(data)
        with self._request("POST", f"http://{self.host}/v2/{name}/blobs/uploads/", b"", "application/json") as r:
            location = r.headers["Location"]
        if location.startswith("/"):
            location = f"http://{self.host}{location}"
        url = f"{location}{'&' if '?' in location else '?'}digest={digest}"
        with self._request("PUT", url, data, "application/octet-stream") as r:
            assert r.status == 201, r.status
        return digest

    def push_manifest(self, name: str, reference: str, manifest: dict, media_type: str) -> str:
        body = json.dumps(manifest).encode()
        with self._request("PUT", f"http://{self.host}/v2/{name}/manifests/{reference}", body, media_type) as r:
            assert r.status == 201, r.status
        self.sizes[digest_of(body)] = len(body)
        return digest_of(body)

    def push_image(self, name: str, tag: str, env: list[str], architecture: str = "amd64") -> str:
        """An image whose config sets env; the digest of its manifest."""
        config = json.dumps(
            {
                "architecture": architecture,
                "os": "linux",
                "config": {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", *env]},
                "rootfs": {"type": "layers", "diff_ids": [digest_of(b"\0" * 1024)]},
            }
        ).encode()
        manifest = {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": OCI_CONFIG, "digest": self.push_blob(name, config), "size": len(config)},
            "layers": [{"mediaType": OCI_LAYER, "digest": self.push_blob(name, EMPTY_LAYER), "size": len(EMPTY_LAYER)}],
        }
        return self.push_manifest(name, tag, manifest, OCI_MANIFEST)


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    server = Registry(tmp_path_factory.mktemp("registry"))
    try:
        server.with_var = server.push_image(
            "acme/trainer", "1.0", ["NVIDIA_VISIBLE_DEVICES=all", "CUDA_VERSION=12.4.1"]
        )
        server.push_image("acme/trainer-cu121", "1.0", [])
        arm = server.push_image("acme/serve", "arm64-only", [], architecture="arm64")
        amd = server.push_image("acme/serve", "amd64-only", ["NVIDIA_VISIBLE_DEVICES=all"])
        platforms = ((arm, "arm64"), (amd, "amd64"))
        index = {
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [
                {
                    "mediaType": OCI_MANIFEST,
                    "digest": digest,
                    "size": server.sizes[digest],
                    "platform": {"os": "linux", "architecture": architecture},
                }
                for digest, architecture in platforms
            ],
        }
        server.push_manifest("acme/serve", "2.0", index, OCI_INDEX)
        yield server
    finally:
        server.stop()


def judged(reader: RegistryReader, *images: str):
    documents = []
    for i, image in enumerate(images):
        spec = {"containers": [{"name": "main", "image": image}]}
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "ns"}, "spec": spec}
        documents.append(Document("pods.yaml", i, pod, i + 1))
    return validate_documents(documents, RuleConfig(image_reader=reader)).findings


def reader_for(registry: Registry, credentials: bool = True, **settings) -> RegistryReader:
    """A reader of the test registry, with the pull secret's credentials for it (or none)."""
    secret = {registry.host: (USER, PASSWORD)} if credentials else {}
    return RegistryReader(
        RegistrySettings(read=True, insecure_registries=(registry.host,), credentials=secret, **settings)
    )


def test_the_images_own_config_decides_by_tag_and_by_digest(registry: Registry) -> None:
    reader = reader_for(registry)
    by_tag, by_digest = judged(
        reader, f"{registry.host}/acme/trainer:1.0", f"{registry.host}/acme/trainer@{registry.with_var}"
    )
    for finding in (by_tag, by_digest):
        assert finding.rule == "KGPU501"
        assert "the image's config sets NVIDIA_VISIBLE_DEVICES=all" in finding.message
        assert f"read from the registry {registry.host}, digest sha256:" in finding.message
    assert reader.notes == []
    # The registry's challenge once (then its credentials for the repository), two manifests, one config
    # blob for both (cached by its digest).
    assert reader.requests == 4


def test_a_config_without_the_variable_lifts_a_name_only_verdict(registry: Registry) -> None:
    image = f"{registry.host}/acme/trainer-cu121:1.0"
    offline = validate_documents(
        [
            Document(
                "p.yaml",
                0,
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": "p"},
                    "spec": {"containers": [{"name": "main", "image": image}]},
                },
                1,
            )
        ],
        RuleConfig(),
    ).findings
    assert [f.rule for f in offline] == ["KGPU501"] and "pattern match" in offline[0].message
    reader = reader_for(registry)
    assert judged(reader, image) == []
    (note,) = reader.notes
    assert note.startswith(f"image {image}: its config (read from the registry {registry.host}, digest sha256:")
    assert "sets no NVIDIA_VISIBLE_DEVICES; the verdict from its name is lifted" in note


def test_the_linux_amd64_image_of_an_index_is_read(registry: Registry) -> None:
    (finding,) = judged(reader_for(registry), f"{registry.host}/acme/serve:2.0")
    assert "the image's config sets NVIDIA_VISIBLE_DEVICES=all" in finding.message


def test_a_missing_image_is_a_note_and_the_offline_verdict_stands(registry: Registry) -> None:
    reader = reader_for(registry)
    image = f"{registry.host}/acme/absent:1.0-gpu"
    (finding,) = judged(reader, image)
    assert "a pattern match, not a known family" in finding.message
    (note,) = reader.notes
    assert f"could not be read from the registry {registry.host} (HTTP 404" in note
    assert note.endswith("the verdict from its name stands")


def test_without_the_pull_secret_the_challenge_is_a_note_and_the_offline_verdict_stands(registry: Registry) -> None:
    reader = reader_for(registry, credentials=False)
    image = f"{registry.host}/acme/trainer-cu121:1.0"
    (finding,) = judged(reader, image)
    assert "a pattern match, not a known family" in finding.message
    (note,) = reader.notes
    assert f"could not be read from the registry {registry.host} (HTTP 401" in note
    assert "asks for credentials that were not given" in note


def test_the_cli_reads_the_registry_and_keeps_configs_in_its_cache_dir(registry: Registry, tmp_path: Path) -> None:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
        f"spec: {{containers: [{{name: main, image: '{registry.host}/acme/trainer:1.0'}}]}}\n",
        encoding="utf-8",
    )
    pull_secret = tmp_path / "dockerconfig.json"
    pull_secret.write_text(json.dumps({"auths": {registry.host: {"username": USER, "password": PASSWORD}}}))
    cache = tmp_path / "cache"
    args = [
        "--registry-read",
        "--insecure-registry",
        registry.host,
        "--docker-config",
        str(pull_secret),
        "--registry-cache-dir",
        str(cache),
        "--fail-on",
        "never",
    ]
    out = io.StringIO()
    assert cli_run([*args, str(manifest)], stdout=out, stderr=io.StringIO()) == 0
    assert "the image's config sets NVIDIA_VISIBLE_DEVICES=all" in out.getvalue()
    assert [p.name.split("-")[0] for p in cache.iterdir()] == ["sha256"]
    offline = io.StringIO()
    assert cli_run(["--fail-on", "never", str(manifest)], stdout=offline, stderr=io.StringIO()) == 0
    assert "KGPU501" not in offline.getvalue()  # offline stays the default: a name that says nothing


def test_the_module_reads_with_the_image_registry_option(registry: Registry, tmp_path: Path) -> None:
    pull_secret = tmp_path / "dockerconfig.json"
    auth = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    pull_secret.write_text(json.dumps({"auths": {registry.host: {"auth": auth}}}), encoding="utf-8")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"containers": [{"name": "main", "image": f"{registry.host}/acme/trainer:1.0"}]},
    }
    option = {"read": True, "insecure_registries": [registry.host], "docker_config": str(pull_secret)}
    code, result = run_module({"definition": pod, "image_registry": option, "fail_on": "never"})
    assert code == 0, result
    (finding,) = result["findings"]
    assert finding["rule"] == "KGPU501" and f"read from the registry {registry.host}" in finding["message"]
    assert PASSWORD not in json.dumps(result) and auth not in json.dumps(result)
    code, offline = run_module({"definition": pod, "fail_on": "never"})
    assert code == 0 and offline["findings"] == []


def test_with_the_registry_stopped_a_note_names_it_and_the_offline_verdict_stands(registry: Registry) -> None:
    registry.stop()  # the last test of the file: the registry is down from here on
    reader = reader_for(registry, timeout=2)
    known, likely = judged(
        reader, f"{registry.host}/nvidia/cuda:12.4.1-base-ubuntu22.04", f"{registry.host}/acme/train:cu121"
    )
    assert "the official CUDA image" in known.message
    assert "a pattern match, not a known family" in likely.message
    (note,) = reader.notes  # the second image is not tried against a registry known to be down
    assert f"could not be read from the registry {registry.host} (could not connect:" in note
    assert note.endswith("the verdict from its name stands")
