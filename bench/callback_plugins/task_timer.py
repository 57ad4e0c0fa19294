# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A callback for the benchmarks: each task's name, action and seconds, appended as JSON lines to
the file KUBEGPU_TASK_TIMES names (nothing without it)."""

from __future__ import annotations

import json
import os
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = r"""
name: task_timer
type: aggregate
short_description: each task's seconds, as JSON lines, for the benchmarks
description: Appends name, action and seconds of every task result to the file KUBEGPU_TASK_TIMES names.
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "task_timer"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self.path = os.environ.get("KUBEGPU_TASK_TIMES")
        self.started: dict[str, float] = {}

    def v2_playbook_on_task_start(self, task, is_conditional):  # noqa: ANN001
        self.started[task._uuid] = time.monotonic()

    def _done(self, result) -> None:  # noqa: ANN001
        task = result._task
        if not self.path or task._uuid not in self.started:
            return
        entry = {"name": task.get_name(), "action": task.action, "seconds": time.monotonic() - self.started[task._uuid]}
        entry["writes"] = result._result.get("writes", 0) if isinstance(result._result, dict) else 0
        with open(self.path, "a", encoding="utf-8") as out:
            out.write(json.dumps(entry) + "\n")

    v2_runner_on_ok = v2_runner_on_failed = v2_runner_on_skipped = _done
