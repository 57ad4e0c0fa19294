"""Module arguments for AnsibleModule in unit tests, on every ansible-core the collection supports:
ansible.module_utils.testing.patch_module_args where it exists (2.19 and later), else what it
replaced, the encoded arguments in ansible.module_utils.basic._ANSIBLE_ARGS (2.18)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

from ansible.module_utils import basic

try:
    from ansible.module_utils.testing import patch_module_args
except ImportError:  # ansible-core 2.18

    @contextmanager
    def patch_module_args(args: dict[str, Any] | None = None) -> Iterator[None]:
        encoded = json.dumps({"ANSIBLE_MODULE_ARGS": args or {}}).encode()
        with mock.patch.object(basic, "_ANSIBLE_ARGS", encoded):
            yield


__all__ = ["patch_module_args"]
