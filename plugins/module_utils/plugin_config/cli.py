# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu-plugin-config-validate: the checks of the gpu_plugin_config_validate module as a command line tool."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TextIO

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.severity import ERROR, WARNING
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_config import schema
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_config.sources import (
    HAS_YAML,
    check_set,
    merged,
    report_lines,
    sets_from_text,
)

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
FAIL_ON = {"error": (ERROR,), "warning": (ERROR, WARNING), "never": ()}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpu-plugin-config-validate",
        description="Check NVIDIA device-plugin config files (version: v1) offline: every key the plugin "
        "would reject (it exits) or ignore (capacity is not what the config says), with the key's path and the fix. "
        "A file is a config, a ConfigMap of configs, or the values of the plugin's or the GPU Operator's Helm chart.",
    )
    parser.add_argument("paths", nargs="+", help="config files; - reads standard input")
    parser.add_argument(
        "--release",
        choices=schema.RELEASES,
        default=schema.DEFAULT_RELEASE,
        help="the plugin release whose schema applies",
    )
    parser.add_argument(
        "--default", metavar="NAME", help="the config the plugin reads by default (a key of the ConfigMap)"
    )
    parser.add_argument(
        "--static-daemonset",
        action="store_true",
        help="the config is for NVIDIA's static DaemonSet, which runs no MPS control daemon",
    )
    parser.add_argument(
        "--fail-on", choices=sorted(FAIL_ON), default="error", help="the lowest severity that fails the run"
    )
    parser.add_argument(
        "--json", dest="json_file", metavar="FILE", help="write the verdict as JSON (- for standard output)"
    )
    return parser


def read_source(path: str, stdin: TextIO) -> str:
    if path == "-":
        return stdin.read()
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def run(argv: Sequence[str] | None = None, streams: tuple[TextIO, TextIO, TextIO] | None = None) -> int:
    """The command line; streams are (stdout, stderr, stdin)."""
    stdout, stderr, stdin = streams or (sys.stdout, sys.stderr, sys.stdin)
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    if not HAS_YAML:
        stderr.write("gpu-plugin-config-validate: error: PyYAML is required (pip install PyYAML)\n")
        return EXIT_USAGE
    results = []
    for path in args.paths:
        try:
            text = read_source(path, stdin)
        except (OSError, UnicodeDecodeError) as exc:
            stderr.write(f"gpu-plugin-config-validate: error: cannot read {path}: {exc}\n")
            return EXIT_USAGE
        name = "<stdin>" if path == "-" else path
        results += [check_set(s, args.release, args.static_daemonset) for s in sets_from_text(text, name, args.default)]
    verdict = merged(results)
    if args.json_file:
        text = json.dumps(verdict, indent=2, sort_keys=True) + "\n"
        if args.json_file == "-":
            stdout.write(text)
        else:
            with open(args.json_file, "w", encoding="utf-8") as handle:
                handle.write(text)
    if args.json_file != "-":
        lines = report_lines(verdict["findings"])
        count = {s: sum(f["severity"] == s for f in verdict["findings"]) for s in (ERROR, WARNING)}
        lines.append(
            f"{len(verdict['configs'])} config(s) checked against {args.release}: {count[ERROR]} error(s), {count[WARNING]} warning(s)"
        )
        stdout.write("\n".join(lines) + "\n")
    failing = FAIL_ON[args.fail_on]
    return EXIT_FAILED if any(f["severity"] in failing for f in verdict["findings"]) else EXIT_OK


def main() -> int:
    return run()
