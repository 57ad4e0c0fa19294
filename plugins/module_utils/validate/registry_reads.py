# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The optional read of an image's own config from its registry (the OCI distribution API), thin I/O:
GET /v2/<name>/manifests/<reference> (an index gives its linux/amd64 manifest), then GET the config blob,
checked against its digest. Anonymous, or with a bearer token from the challenge's realm, or with the
basic credentials of a pull secret. Each request has a timeout and the run a total budget; configs are
cached per digest in memory (and in a cache directory when one is given). What the config says is
decided in registry.py."""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.images import (
    ImageEnv,
    NotRead,
    offline_image_env,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.registry import (
    INDEX_TYPES,
    MANIFEST_ACCEPT,
    Challenge,
    ImageRef,
    RegistrySettings,
    basic_header,
    config_digest,
    config_env,
    docker_config_credentials,
    gpu_env,
    lifted_note,
    not_read,
    parse_challenge,
    parse_image,
    platform_manifest,
    registry_verdict,
    token_url,
)

# The image_registry option of gpu_pod_validate (and the CLI's --registry-* flags): off by default.
IMAGE_REGISTRY_OPTIONS: dict[str, dict[str, Any]] = dict(
    read={"type": "bool", "default": False},
    timeout={"type": "float", "default": RegistrySettings.timeout},
    budget={"type": "float", "default": RegistrySettings.budget},
    insecure_registries={"type": "list", "elements": "str", "default": []},
    cache_dir={"type": "path"},
    docker_config={"type": "path"},
)
MAX_DOCUMENT = 4 * 1024 * 1024  # a manifest, index or config larger than this is not an image's


class ReadError(Exception):
    """One registry read failed; the message says how, without credentials. `unreachable` when the registry
    could not be reached at all (or the budget is spent): its other images are not tried."""

    def __init__(self, message: str, unreachable: bool = False) -> None:
        super().__init__(message)
        self.unreachable = unreachable


class RegistryReader:
    """Reads the configs of the images a run meets, each image once; the notes say what it could not
    read and which verdicts its reads lifted."""

    def __init__(self, settings: RegistrySettings, opener: urllib.request.OpenerDirector | None = None) -> None:
        self.settings = settings
        self.notes: list[str] = []
        self.requests = 0
        self._opener = opener or urllib.request.build_opener()
        self._deadline: float | None = None
        self._tokens: dict[str, str] = {}  # registry and repository: its bearer token
        self._configs: dict[str, dict[str, str]] = {}  # config digest: its env
        self._images: dict[str, ImageEnv | None | NotRead] = {}
        self._down: dict[str, str] = {}  # registry: why it could not be reached

    def __call__(self, image: str) -> ImageEnv | None | NotRead:
        if image not in self._images:
            self._images[image] = self._verdict(image)
        return self._images[image]

    def _verdict(self, image: str) -> ImageEnv | None | NotRead:
        ref = parse_image(image)
        if ref.registry in self._down:
            return NotRead(self._down[ref.registry])
        try:
            digest, env = self._read(ref)
        except ReadError as exc:
            failed = not_read(image, ref.registry, str(exc))
            self.notes.append(failed.reason)
            if exc.unreachable:
                self._down[ref.registry] = failed.reason
            return failed
        verdict = registry_verdict(env, ref.registry, digest)
        if verdict is None and offline_image_env(image) is not None:
            self.notes.append(lifted_note(image, ref.registry, digest))
        return verdict

    # --- the reads --------------------------------------------------------------------------------

    def _read(self, ref: ImageRef) -> tuple[str, dict[str, str]]:
        if self._deadline is None:
            self._deadline = time.monotonic() + self.settings.budget
        manifest, media_type = self._get_json(ref, ref.manifest_path(), MANIFEST_ACCEPT)
        if media_type in INDEX_TYPES or "manifests" in manifest:
            chosen = platform_manifest(manifest)
            if chosen is None:
                raise ReadError("the image index has no linux/amd64 image")
            manifest, _type = self._get_json(ref, ref.manifest_path(chosen), MANIFEST_ACCEPT)
        try:
            digest = config_digest(manifest)
        except ValueError as exc:
            raise ReadError(str(exc)) from None
        if digest not in self._configs:
            self._configs[digest] = self._cached(digest) or self._config(ref, digest)
        return digest, self._configs[digest]

    def _config(self, ref: ImageRef, digest: str) -> dict[str, str]:
        body, _type = self._get(ref, ref.blob_path(digest), "application/json, */*")
        if "sha256:" + hashlib.sha256(body).hexdigest() != digest:
            raise ReadError(f"the config blob does not match its digest {digest}")
        env = gpu_env(config_env(_json(body)))
        self._store(digest, env)
        return env

    def _get_json(self, ref: ImageRef, path: str, accept: str) -> tuple[dict[str, Any], str]:
        body, media_type = self._get(ref, path, accept)
        return _json(body), media_type

    def _get(self, ref: ImageRef, path: str, accept: str) -> tuple[bytes, str]:
        scheme = "http" if ref.registry in self.settings.insecure_registries else "https"
        url = f"{scheme}://{ref.registry}{path}"
        key = f"{ref.registry}/{ref.repository}"
        try:
            return self._open(url, accept, self._tokens.get(key))
        except urllib.error.HTTPError as exc:
            if exc.code != 401:
                raise ReadError(f"HTTP {exc.code} for {path}") from None
            challenge = parse_challenge(exc.headers.get("WWW-Authenticate"))
        credentials = self.settings.credentials.get(ref.registry)
        if challenge is not None and challenge.scheme == "bearer":
            self._tokens[key] = self._token(challenge, ref, credentials)
        elif challenge is not None and challenge.scheme == "basic" and credentials is not None:
            self._tokens[key] = basic_header(credentials)
        else:
            raise ReadError(f"HTTP 401 for {path}: the registry asks for credentials that were not given")
        try:
            return self._open(url, accept, self._tokens[key])
        except urllib.error.HTTPError as exc:
            raise ReadError(f"HTTP {exc.code} for {path} after authenticating") from None

    def _token(self, challenge: Challenge, ref: ImageRef, credentials: tuple[str, str] | None) -> str:
        try:
            url = token_url(challenge, ref)
            body, _type = self._open(url, "application/json", basic_header(credentials) if credentials else None)
        except ValueError as exc:
            raise ReadError(str(exc)) from None
        except urllib.error.HTTPError as exc:
            raise ReadError(f"HTTP {exc.code} from the token realm") from None
        data = _json(body)
        token = data.get("token") or data.get("access_token")
        if not isinstance(token, str) or not token:
            raise ReadError("the token realm gave no token")
        return f"Bearer {token}"

    def _open(self, url: str, accept: str, authorization: str | None) -> tuple[bytes, str]:
        """One GET within the per-request timeout and what is left of the budget. HTTP errors are raised
        as they are (the caller reads a 401's challenge); others become a ReadError."""
        left = (self._deadline or time.monotonic()) - time.monotonic()
        if left <= 0:
            raise ReadError(f"the registry read's budget of {self.settings.budget:g} s is spent", unreachable=True)
        request = urllib.request.Request(url, headers={"Accept": accept})
        if authorization:
            # Not sent on to where a blob read is redirected (a storage URL signs itself).
            request.add_unredirected_header("Authorization", authorization)
        self.requests += 1
        try:
            with self._opener.open(request, timeout=min(self.settings.timeout, left)) as response:
                body = response.read(MAX_DOCUMENT + 1)
                media_type = response.headers.get("Content-Type", "").split(";")[0].strip()
        except urllib.error.HTTPError:
            raise
        except urllib.error.URLError as exc:
            raise ReadError(f"could not connect: {exc.reason}", unreachable=True) from None
        except (TimeoutError, OSError) as exc:
            raise ReadError(f"could not connect: {exc}", unreachable=True) from None
        except (http.client.HTTPException, ValueError) as exc:
            raise ReadError(f"a broken answer ({exc.__class__.__name__})") from None
        if len(body) > MAX_DOCUMENT:
            raise ReadError(f"a response over {MAX_DOCUMENT} bytes")
        return body, media_type

    # --- the cache directory ----------------------------------------------------------------------

    def _cache_file(self, digest: str) -> str | None:
        directory = self.settings.cache_dir
        return os.path.join(directory, digest.replace(":", "-") + ".json") if directory else None

    def _cached(self, digest: str) -> dict[str, str] | None:
        path = self._cache_file(digest)
        try:
            with open(path or "", encoding="utf-8") as stream:
                env = json.load(stream)
        except (OSError, ValueError):
            return None
        return {str(k): str(v) for k, v in env.items()} if isinstance(env, Mapping) else None

    def _store(self, digest: str, env: dict[str, str]) -> None:
        path = self._cache_file(digest)
        if path is None:
            return
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path + ".tmp", "w", encoding="utf-8") as stream:
                json.dump(env, stream)
            os.replace(path + ".tmp", path)
        except OSError as exc:
            self.notes.append(f"the image config cache {self.settings.cache_dir} could not be written ({exc})")


def _json(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except ValueError:
        raise ReadError("the registry's answer is not JSON") from None
    if not isinstance(data, dict):
        raise ReadError("the registry's answer is not a JSON object")
    return data


def registry_settings(option: Mapping[str, Any] | None, where: str = "image_registry") -> RegistrySettings:
    """The image_registry option as settings; a pull secret's .dockerconfigjson is read from its file."""
    option = option or {}
    settings = RegistrySettings(
        read=bool(option.get("read")),
        timeout=float(option.get("timeout") or RegistrySettings.timeout),
        budget=float(option.get("budget") or RegistrySettings.budget),
        insecure_registries=tuple(option.get("insecure_registries") or ()),
        cache_dir=option.get("cache_dir") or None,
    )
    if settings.timeout <= 0 or settings.budget <= 0:
        raise OptionError(f"{where}: timeout and budget must be positive")
    path = option.get("docker_config")
    if not path:
        return settings
    try:
        with open(path, encoding="utf-8") as stream:
            data = json.load(stream)
    except (OSError, ValueError) as exc:
        raise OptionError(f"{where}.docker_config: cannot read {path} as JSON ({exc.__class__.__name__})") from None
    return replace(settings, credentials=docker_config_credentials(data, f"{where}.docker_config {path}"))


def registry_reader(option: Mapping[str, Any] | None) -> RegistryReader | None:
    """The reader the option asks for, or None when the read is off (the default)."""
    settings = registry_settings(option)
    return RegistryReader(settings) if settings.read else None
