"""Modules that talk to the API server keep an inline kubeconfig's credentials out of their output."""

import copy
import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from ansible_collections.kubegpu.scheduling.plugins.modules import gpu_node_facts
from tests.module_args import patch_module_args

TOKEN = "s3cr3t-bearer-token-value"
KUBECONFIG = {
    "apiVersion": "v1",
    "kind": "Config",
    # Port 9 on loopback: nothing listens, the connection is refused at once.
    "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9", "insecure-skip-tls-verify": True}}],
    "users": [{"name": "u", "user": {"token": TOKEN}}],
    "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
    "current-context": "x",
}


def test_inline_kubeconfig_token_never_reaches_output():
    out = io.StringIO()
    args = {"kubeconfig": KUBECONFIG, "_ansible_no_log": False}
    with patch_module_args(args), redirect_stdout(out), pytest.raises(SystemExit) as exited:
        gpu_node_facts.main()
    assert exited.value.code == 1
    text = out.getvalue()
    result = json.loads(text)
    assert "127.0.0.1:9" in result["msg"]
    assert TOKEN not in text


def run_facts(args: dict) -> tuple[dict, str]:
    out = io.StringIO()
    with patch_module_args({**args, "_ansible_no_log": False}), redirect_stdout(out), pytest.raises(SystemExit):
        gpu_node_facts.main()
    return json.loads(out.getvalue()), out.getvalue()


def test_a_failing_exec_plugin_of_an_inline_kubeconfig_is_named_unmasked(tmp_path: Path):
    plugin = tmp_path / "aws"
    plugin.write_text("#!/bin/sh\necho 'Unable to locate credentials' >&2\nexit 255\n")
    plugin.chmod(0o755)
    kubeconfig = copy.deepcopy(KUBECONFIG)
    kubeconfig["users"][0]["user"] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": str(plugin),
            "args": ["--profile", "secret-profile-name"],
        }
    }
    result, text = run_facts({"kubeconfig": kubeconfig})
    assert result["msg"].endswith(
        f'exec plugin "{plugin}" of kubeconfig user "u" failed with exit code 255: Unable to locate credentials'
    )
    assert "secret-profile-name" not in text


def test_secrets_given_in_the_environment_are_masked(monkeypatch: pytest.MonkeyPatch):
    proxy_secret = "proxy-user:proxy-secret-value"
    monkeypatch.setenv("K8S_AUTH_PROXY_HEADERS_PROXY_BASIC_AUTH", proxy_secret)
    monkeypatch.setenv("K8S_AUTH_API_KEY", TOKEN)
    # The message quotes the bad value of another variable: a secret in it is masked.
    monkeypatch.setenv("K8S_AUTH_VERIFY_SSL", f"maybe {TOKEN}")
    result, text = run_facts({"host": "https://127.0.0.1:9"})
    assert result["msg"].startswith("K8S_AUTH_VERIFY_SSL: ")
    assert TOKEN not in text and proxy_secret not in text
