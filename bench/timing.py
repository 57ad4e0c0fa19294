# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Timing contenders in subprocesses, alternating repetitions, for the benchmarks in bench/.

A contender is one command or a sequence of commands (timed together). Each run is a child
process; `os.wait4` gives that child's own resource usage, its reaped descendants included, so
user + system time is the CPU the whole tree spent.

Peak RSS: Linux carries the high-water RSS of the address space a process had before `exec`
into its `ru_maxrss`, and a child forked (or vforked) from this harness starts with the
harness's pages, so `wait4` would report at least the harness's own RSS. Each command therefore
runs under GNU time (`/usr/bin/time -f %M`), a tiny process that forks the command itself and
reports the command's own peak RSS (the largest process of its tree, in KiB). Without GNU time
the `wait4` figure is kept, an upper bound.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

GNU_TIME = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None


@dataclass
class Contender:
    name: str
    commands: list[list[str]]
    env: dict[str, str] = field(default_factory=dict)
    capture: bool = False  # keep the last command's stdout (for results parsed after the run)
    before: Callable[[], None] | None = None  # untimed set-up before each run
    after: Callable[[Contender, str], None] | None = None  # untimed check after each run, gets stdout
    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)
    rss_kib: list[int] = field(default_factory=list)
    codes: list[int] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        data = {k: v for k, v in asdict(self).items() if k not in ("before", "after", "env")}
        if self.walls:
            data.update(
                median=statistics.median(self.walls),
                min=min(self.walls),
                max=max(self.walls),
                cpu_median=statistics.median(self.cpus),
                peak_rss_mb=max(self.rss_kib) / 1024,
            )
        return data


def run_command(argv: Sequence[str], env: dict[str, str], capture: bool) -> tuple[float, float, int, int, str]:
    """(wall s, cpu s, max rss KiB, exit code, stdout if captured) of one child process."""
    rss_file = None
    if GNU_TIME:
        handle, rss_file = tempfile.mkstemp(prefix="bench-rss-")
        os.close(handle)
        argv = [GNU_TIME, "-f", "%M", "-o", rss_file, *argv]
    started = time.perf_counter()
    process = subprocess.Popen(
        list(argv),
        stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **env},
    )
    output = b""
    if capture:
        assert process.stdout is not None
        output = process.stdout.read()
        process.stdout.close()
    _pid, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    rss = usage.ru_maxrss
    if rss_file:
        with open(rss_file, encoding="utf-8") as report:
            lines = report.read().split()
        os.unlink(rss_file)
        rss = int(lines[-1]) if lines and lines[-1].isdigit() else rss
    return (wall, usage.ru_utime + usage.ru_stime, rss, process.returncode, output.decode("utf-8", "replace"))


def run_once(contender: Contender) -> None:
    if contender.before is not None:
        contender.before()
    wall = cpu = 0.0
    rss = code = 0
    output = ""
    for argv in contender.commands:
        w, c, r, rc, out = run_command(argv, contender.env, contender.capture)
        wall, cpu, rss, code, output = wall + w, cpu + c, max(rss, r), code or rc, out
    contender.walls.append(wall)
    contender.cpus.append(cpu)
    contender.rss_kib.append(rss)
    contender.codes.append(code)
    if contender.after is not None:
        contender.after(contender, output)


def alternate(contenders: Sequence[Contender], repeat: int, log: Callable[[str], None] | None = None) -> None:
    """Run every contender `repeat` times, rotating the order each round so slow spells hit all alike."""
    for repetition in range(repeat):
        shift = repetition % len(contenders)
        for contender in list(contenders[shift:]) + list(contenders[:shift]):
            run_once(contender)
            if log:
                log(
                    f"  [{repetition + 1}/{repeat}] {contender.name}: {contender.walls[-1]:.2f}s "
                    f"(exit {contender.codes[-1]})"
                )
