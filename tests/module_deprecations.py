"""Deprecations as a module's own process reports them, in its result, for modules run in a test's
process: the ones gathered so far are dropped first, and where ansible-core 2.19 and later have been
told the process is the controller (a test that loaded a controller plugin does that), deprecations
would go to the display instead of the result; for the run they are the module's again."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from unittest import mock

from ansible.module_utils.common import warnings

try:
    from ansible.module_utils import _internal
except ImportError:  # ansible-core 2.18: modules always report their deprecations in the result
    _internal = None


@contextmanager
def as_module_process() -> Iterator[None]:
    warnings._global_deprecations.clear()
    with ExitStack() as stack:
        if _internal is not None and hasattr(_internal, "is_controller"):
            stack.enter_context(mock.patch.object(_internal, "is_controller", False))
        yield
