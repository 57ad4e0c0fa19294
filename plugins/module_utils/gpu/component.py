# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One GPU system component: the images it runs, its published command lines, where it usually
runs, and whether one container runs it (gpu/components.py holds the catalogue of them)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# The last element of a published command line that lets any further arguments follow (a
# binary's flags). Never placed after a shell's `-c`, whose next argument is the whole script.
ANY_ARGUMENTS = "..."
# The end of a published shell script after which its operator writes the user's flags (`-name` or
# `-name=value`, words without a shell's metacharacters); argv holds no NUL, so no script ends so itself.
FLAGS_FOLLOW = "\0flags"
_FLAG_WORDS = re.compile(r"(?: -[A-Za-z0-9][\w.-]*(?:=[\w.,:/@%+=-]*)?)*")


@dataclass(frozen=True)
class Component:
    """One GPU system component: its name, what it runs, and where it usually runs."""

    name: str
    images: tuple[str, ...]  # repository paths, matched at the tail of a container's image repository
    commands: tuple[tuple[str, ...], ...] = ()  # command + args as published; ANY_ARGUMENTS last: flags follow
    entrypoint_args: bool = (
        False  # the image's entrypoint is the component's binary: args without a command are its flags
    )
    namespaces: tuple[str, ...] = ()  # where it is usually deployed (information only)
    source: str = ""  # where the images and commands are published
    helper_images: tuple[str, ...] = ()  # images it ships beside its own (init containers, pause): never enough alone

    def runs(self, container: Mapping[str, Any], tails: Sequence[str]) -> bool:
        """Whether the container runs this component: one of its images with its own command line."""
        if not any(tail in self.images or tail in self.helper_images for tail in tails):
            return False
        command, args = _strings(container.get("command")), _strings(container.get("args"))
        if command is None or args is None:
            return False
        if not command and (not args or self.entrypoint_args):
            return True
        argv = (*command, *args)
        return any(_argv_matches(argv, pattern) for pattern in self.commands)

    def own_image(self, tails: Sequence[str]) -> bool:
        return any(tail in self.images for tail in tails)


def _strings(value: object) -> tuple[str, ...] | None:
    """A command or args list; None when it is not a list of strings (never recognised)."""
    if value is None:
        return ()
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    return None


def _argv_matches(argv: tuple[str, ...], pattern: tuple[str, ...]) -> bool:
    if pattern and pattern[-1] == ANY_ARGUMENTS:
        fixed = pattern[:-1]
        return argv[: len(fixed)] == fixed
    if pattern and pattern[-1].endswith(FLAGS_FOLLOW):
        script = pattern[-1][: -len(FLAGS_FOLLOW)]
        last = argv[-1] if len(argv) == len(pattern) else ""
        return (
            argv[:-1] == pattern[:-1]
            and last.startswith(script)
            and _FLAG_WORDS.fullmatch(last[len(script) :]) is not None
        )
    return argv == pattern


def with_flags(*argv: str) -> tuple[str, ...]:
    """A published command line whose last argument, a shell script, may be followed by flags."""
    return (*argv[:-1], argv[-1] + FLAGS_FOLLOW)
