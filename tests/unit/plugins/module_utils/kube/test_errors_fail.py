"""errors_fail is the one failure path: an error's message, status and result fields reach fail_json."""

from __future__ import annotations

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import (
    CheckFailed,
    ClusterError,
    KubegpuError,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.module import errors_fail, require_library


class Failed(Exception):
    pass


class FakeModule:
    def __init__(self) -> None:
        self.failure: dict | None = None

    def fail_json(self, **fields):
        self.failure = fields
        raise Failed()


def failure_of(error: Exception) -> dict | None:
    module = FakeModule()
    with pytest.raises(Failed), errors_fail(module):
        raise error
    return module.failure


def test_an_error_fails_with_its_message_and_status():
    assert failure_of(ClusterError("forbidden: list nodes", 403)) == {"msg": "forbidden: list nodes", "status": 403}
    assert failure_of(KubegpuError("bad option")) == {"msg": "bad option", "status": None}


def test_a_failed_verdict_fails_with_the_whole_result_and_no_status_of_its_own():
    result = {"changed": False, "healthy": False, "findings": [{"kind": "no_device_plugin_pod"}]}
    assert failure_of(CheckFailed("1 error", result=result)) == {"msg": "1 error", **result}


def test_a_missing_library_fails_naming_it_with_the_import_error():
    failure = failure_of_call(lambda: require_library(False, "kubernetes", "No module named 'kubernetes'"))
    assert "kubernetes" in failure["msg"] and failure["exception"] == "No module named 'kubernetes'"
    require_library(True, "kubernetes")


def failure_of_call(call) -> dict:
    module = FakeModule()
    with pytest.raises(Failed), errors_fail(module):
        call()
    assert module.failure is not None
    return module.failure
