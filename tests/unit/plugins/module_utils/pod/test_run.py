"""gpu_pod on the write-module skeleton: the definition taken as one Pod, as a mapping or a YAML
string, anything else refused naming the option before any request; the plan against an API held in
memory: create once, a rerun unchanged, check mode sends nothing, removal of what exists."""

from __future__ import annotations

import copy
import io
import json
from contextlib import redirect_stdout
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.pod import lifecycle
from ansible_collections.kubegpu.scheduling.plugins.module_utils.pod.run import definition_of, run
from ansible_collections.kubegpu.scheduling.plugins.modules import gpu_pod
from tests.module_args import patch_module_args

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "sample", "namespace": "gpu"},
    "spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 1}}}]},
}
PATH = "/api/v1/namespaces/gpu/pods/sample"
NOBODY = {"host": "https://127.0.0.1:1", "validate_certs": False, "api_key": "unused"}


def test_one_pod_is_taken_as_a_mapping_or_a_yaml_string():
    assert definition_of(POD) == POD
    assert definition_of(yaml.safe_dump(POD)) == POD
    assert definition_of(None) is None


@pytest.mark.parametrize(
    "value, problem",
    [
        ([POD], "definition must be one Pod, as a mapping or a YAML string, not list"),
        (yaml.safe_dump_all([POD, POD]), "definition is not one YAML document"),
        ("- a\n- b\n", "definition must be one Pod; the YAML string holds list"),
        ("a: [", "definition is not one YAML document"),
        (3, "not int"),
    ],
)
def test_anything_else_is_an_option_error_naming_the_option(value, problem):
    with pytest.raises(OptionError, match=problem.replace("(", r"\(")):
        definition_of(value)


def run_module(args: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    out = io.StringIO()
    with patch_module_args(args), redirect_stdout(out), pytest.raises(SystemExit) as exited:
        gpu_pod.main()
    return exited.value.code, json.loads(out.getvalue())


def test_the_module_refuses_a_list_before_any_request_with_the_counts():
    code, result = run_module({**NOBODY, "definition": [POD]})
    assert code == 1 and result["msg"].startswith("definition must be one Pod")
    assert result["writes"] == 0 and result["api_requests"] == 0


def test_the_wait_options_are_the_waiting_groups():
    spec = gpu_pod.argument_spec()
    assert spec["wait_timeout"]["default"] == 300 and spec["wait"]["default"] is True
    assert spec["definition"]["type"] == "raw"


class MemoryPods:
    """GET (find), POST and DELETE of pods by path; writes counted."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.written: list[str] = []

    def find(self, path: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.objects.get(path))

    def get(self, path: str) -> dict[str, Any]:
        return copy.deepcopy(self.objects[path])

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.written.append(f"create {path}")
        self.objects[f"{path}/{body['metadata']['name']}"] = copy.deepcopy(body)
        return body

    def delete(self, path: str) -> None:
        self.written.append(f"delete {path}")
        self.objects.pop(path, None)


def module(check_mode: bool = False, **params: Any) -> Any:
    defaults = {"name": None, "namespace": None, "state": "present", "create_namespace": False, "recreate": False}
    defaults.update(wait=False, wait_timeout=5, logs=False, log_lines=10, model_label_keys=None, definition=POD)
    return SimpleNamespace(params={**defaults, **params}, check_mode=check_mode, warn=lambda _text: None)


def test_created_once_then_unchanged_and_check_mode_sends_nothing():
    api = MemoryPods()
    planned = run(module(check_mode=True), api)  # type: ignore[arg-type]
    assert planned.changed and planned.result == {"action": "create"} and api.written == []
    assert planned.diff and planned.diff["before_header"] == "pod gpu/sample"
    done = run(module(), api)  # type: ignore[arg-type]
    assert done.changed and done.result["action"] == "create" and api.written == ["create /api/v1/namespaces/gpu/pods"]
    assert lifecycle.digest_of(api.objects[PATH]) == lifecycle.manifest_digest(POD)
    again = run(module(), api)  # type: ignore[arg-type]
    assert not again.changed and again.result["action"] == "unchanged" and len(api.written) == 1


def test_absent_deletes_what_exists_and_then_nothing():
    api = MemoryPods()
    api.objects[PATH] = lifecycle.with_digest(POD, "d")
    gone = run(module(state="absent", definition=None, name="sample", namespace="gpu"), api)  # type: ignore[arg-type]
    assert gone.changed and gone.result == {"action": "delete"} and api.written == [f"delete {PATH}"]
    assert gone.diff and gone.diff["before"] == {"manifest-sha256": "d"}
    again = run(module(state="absent", definition=None, name="sample", namespace="gpu"), api)  # type: ignore[arg-type]
    assert not again.changed and again.result == {"action": "absent"}
