"""The kubernetes library's loaders and transport without the rest of it (kube/library.py).

Each case runs in a fresh interpreter: the test process may have imported the whole library already,
and then the collection uses it as it is.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

CLIENT = "ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client"


def run(code: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def loader_imports_google_auth() -> bool:
    """Whether the library's kubeconfig loader imports google.auth, and with it requests, at its top
    (kubernetes 30 does; later releases import it where the gcp auth-provider needs it)."""
    spec = importlib.util.find_spec("kubernetes.config.kube_config")
    assert spec is not None and spec.origin
    return "\nimport google.auth.transport.requests\n" in Path(spec.origin).read_text()


def test_the_client_module_imports_none_of_what_a_module_run_does_not_use():
    seen = run(f"""
        import json, sys
        import {CLIENT}
        heavy = ["kubernetes.client.api_client", "kubernetes.client.models", "kubernetes.dynamic",
                 "kubernetes.watch", "kubernetes.stream", "pydantic", "requests", "oauthlib.oauth2.rfc6749"]
        print(json.dumps({{name: name in sys.modules for name in heavy}}))
    """)
    if loader_imports_google_auth():
        del seen["requests"]
    assert seen == dict.fromkeys(seen, False)


def test_the_rest_of_the_library_is_there_when_asked_for():
    seen = run(f"""
        import json
        import {CLIENT}
        import kubernetes
        from kubernetes.client import ApiClient, V1Pod
        from kubernetes.config import kube_config
        from requests_oauthlib import OAuth2Session
        import oauthlib.oauth2
        print(json.dumps({{
            "version": kubernetes.__version__,
            "watch": hasattr(kubernetes.watch, "Watch"),
            "pod": V1Pod.__name__,
            "api_client": ApiClient.__module__,
            "session": OAuth2Session.__module__,
            "loader_api_client": type(kube_config.ApiClient()).__name__,
            "error": oauthlib.oauth2.rfc6749.errors.InvalidClientIdError.__name__,
        }}))
    """)
    assert seen["version"] and seen["watch"] and seen["pod"] == "V1Pod"
    assert seen["api_client"] == "kubernetes.client.api_client"
    assert seen["session"] == "requests_oauthlib.oauth2_session"
    assert seen["loader_api_client"] == "ApiClient"
    assert seen["error"] == "InvalidClientIdError"


def test_a_library_imported_in_full_first_is_used_as_it_is():
    seen = run(f"""
        import json
        import kubernetes.client
        real = kubernetes.client.ApiClient
        from {CLIENT.rsplit(".", 1)[0]} import library
        library.load()
        print(json.dumps({{"same": kubernetes.client.ApiClient is real}}))
    """)
    assert seen == {"same": True}


def test_a_module_that_is_not_installed_is_an_import_error():
    seen = run("""
        import json
        from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.library import deferred
        try:
            deferred("kubegpu_no_such_module")
        except ImportError as exc:
            print(json.dumps({"error": exc.name}))
    """)
    assert seen == {"error": "kubegpu_no_such_module"}
