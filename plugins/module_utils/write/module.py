# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The skeleton every module that writes to the cluster runs on. The module hands it its argument
spec and a `run(module, client)` that decides and writes (nothing in check mode) and says what it
did as a `WriteRun`; the skeleton does the rest the same way for every write module: the option
ranges, one client, `changed`, `writes` and `api_requests` counted by that client, `diff` in diff
mode only, the warnings, and a failure through the one error path with the result beside it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import CheckFailed, KubegpuError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.module import (
    api_module,
    errors_fail,
    module_client,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.options.groups import check_ranges


@dataclass(frozen=True)
class WriteRun:
    """What one run of a write module did: its own result keys, whether it changed anything (or
    would, in check mode), the diff entries, warnings, and why the task fails (None when it does not)."""

    result: Mapping[str, Any]
    changed: bool
    diff: Sequence[Mapping[str, Any]] | Mapping[str, Any] | None = None
    warnings: Sequence[str] = field(default_factory=tuple)
    failure: str | None = None


def counted(client: KubeClient | None) -> dict[str, int]:
    """The requests a run sent, and how many of them were writes, as every module returns them."""
    if client is None:
        return {"writes": 0, "api_requests": 0}
    return {"writes": client.write_count, "api_requests": client.request_count}


def write_result(module: AnsibleModule, done: WriteRun, client: KubeClient | None) -> dict[str, Any]:
    """The module's result for a run; its warnings are handed to Ansible."""
    result = {**done.result, "changed": done.changed, **counted(client)}
    if module._diff and done.diff:  # pylint: disable=protected-access
        result["diff"] = done.diff
    for warning in done.warnings:
        module.warn(warning)
    return result


def run_write_module(
    argument_spec: dict[str, Any],
    run: Callable[[AnsibleModule, KubeClient], WriteRun],
    *,
    offline: Callable[[AnsibleModule], WriteRun | None] | None = None,
    **module_kwargs: Any,
) -> None:
    """Build the module, run it and exit: `exit_json` with the result, or `fail_json` with the
    failure's message and the result beside it. An error raised on the way carries the counts too.
    `offline`, where given, runs first: a WriteRun from it is the run, done without a client (no
    cluster needs to be configured, such as rendering to files); None goes on to `run`."""
    module = api_module(argument_spec, **module_kwargs)
    client: KubeClient | None = None
    with errors_fail(module):
        try:
            check_ranges(module.params)
            done = offline(module) if offline is not None else None
            if done is None:
                client = module_client(module)
                done = run(module, client)
        except KubegpuError as exc:
            if client is not None:
                exc.result = {**counted(client), **exc.result}
            raise
        result = write_result(module, done, client)
        if done.failure:
            raise CheckFailed(done.failure, result=result)
    module.exit_json(**result)
