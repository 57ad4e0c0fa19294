"""Modules that talk to the API server keep an inline kubeconfig's credentials out of their output."""

import io
import json
from contextlib import redirect_stdout

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.kubegpu.scheduling.plugins.modules import gpu_node_facts

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
