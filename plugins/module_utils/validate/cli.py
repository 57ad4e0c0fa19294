# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu-pod-validate: the checks of the gpu_pod_validate module as a command line tool."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TextIO

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.checker import RuleConfig, unknown_rules
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.images import image_env_map
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.junit import junit_xml
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.manifests import (
    DEFAULT_MAX_FILE_SIZE,
    HAS_YAML,
    ManifestError,
    load_manifests,
    parse_text,
    read_text,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.report import (
    FAIL_ON_CHOICES,
    ReportWriteError,
    failed,
    format_text,
    json_report,
    offline_report,
    rule_table,
    summarize,
    summary_line,
    write_json,
    write_text,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.rules import DEFAULT_ALLOW_ANNOTATION
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.sarif import sarif_report

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class UsageError(OptionError):
    """A command line the tool cannot run with."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpu-pod-validate",
        description="Find GPU use that bypasses the Kubernetes scheduler in manifests: NVIDIA_VISIBLE_DEVICES "
        "in env, device mounts, privileged GPU containers, malformed GPU quantities and more.",
    )
    parser.add_argument("paths", nargs="*", help="manifest files, directories or globs (YAML or JSON)")
    parser.add_argument(
        "--fail-on",
        choices=FAIL_ON_CHOICES,
        default="error",
        help="the lowest severity that fails the run (default: error)",
    )
    parser.add_argument(
        "--skip-rule",
        action="append",
        default=[],
        metavar="RULE",
        help="a rule id not to report, e.g. KGPU302; repeat it or separate ids with commas",
    )
    parser.add_argument(
        "--gpu-resource",
        action="append",
        default=[],
        metavar="NAME",
        help="another GPU resource name or glob, e.g. example.com/accel-*",
    )
    parser.add_argument(
        "--image-env", metavar="FILE", help="a YAML or JSON map of image (or glob) to the env its config sets"
    )
    parser.add_argument(
        "--allow-annotation",
        default=DEFAULT_ALLOW_ANNOTATION,
        metavar="KEY",
        help=f"annotation that allows an object's findings, with a reason (default: {DEFAULT_ALLOW_ANNOTATION})",
    )
    parser.add_argument(
        "--max-file-size",
        type=int,
        default=DEFAULT_MAX_FILE_SIZE,
        metavar="BYTES",
        help=f"skip larger files with an error (default: {DEFAULT_MAX_FILE_SIZE})",
    )
    parser.add_argument("--sarif", metavar="FILE", help="write a SARIF 2.1.0 report")
    parser.add_argument("--json", metavar="FILE", dest="json_file", help="write a JSON report")
    parser.add_argument(
        "--junit", metavar="FILE", help="write a JUnit XML report: a test case per finding, failed per --fail-on"
    )
    output = parser.add_mutually_exclusive_group()
    output.add_argument("-q", "--quiet", action="store_true", help="print only the summary line")
    output.add_argument(
        "-v", "--verbose", action="store_true", help="also print allowed findings and the objects not checked"
    )
    parser.add_argument("--list-rules", action="store_true", help="print the rules and exit")
    return parser


def split_ids(values: Sequence[str]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def load_image_env(path: str, max_size: int) -> dict[str, dict[str, str]]:
    try:
        documents, error = parse_text(read_text(path, max_size), path, as_json=path.lower().endswith(".json"))
    except ManifestError as exc:
        raise UsageError(f"--image-env {path}: {exc.message}") from exc
    if error:
        raise UsageError(f"--image-env {path}: {error.message}")
    data = documents[0].data if documents else {}
    return image_env_map(data, f"--image-env {path}")


def rule_config(args: argparse.Namespace) -> RuleConfig:
    skip = split_ids(args.skip_rule)
    unknown = unknown_rules(skip)
    if unknown:
        raise UsageError(f"unknown rule id(s): {', '.join(unknown)} (see --list-rules)")
    image_env = load_image_env(args.image_env, args.max_file_size) if args.image_env else {}
    return RuleConfig(
        gpu_resources=tuple(args.gpu_resource),
        image_env=image_env,
        allow_annotation=args.allow_annotation,
        skip_rules=frozenset(skip),
    )


def run(argv: Sequence[str] | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on bad usage and 0 for --help
        return int(exc.code or 0)
    if args.list_rules:
        stdout.write(rule_table() + "\n")
        return EXIT_OK
    try:
        if not args.paths:
            raise UsageError("no paths given")
        if args.max_file_size <= 0:
            raise UsageError("--max-file-size must be positive")
        if not HAS_YAML:
            raise UsageError("PyYAML is required (pip install PyYAML)")
        config = rule_config(args)
    except OptionError as exc:
        stderr.write(f"gpu-pod-validate: error: {exc}\n")
        return EXIT_USAGE

    report = offline_report(load_manifests(args.paths, None, args.max_file_size), config)
    summary = summarize(report)
    try:
        if args.json_file:
            write_json(args.json_file, json_report(report))
        if args.sarif:
            write_json(args.sarif, sarif_report(report))
        if args.junit:
            write_text(args.junit, junit_xml(report, args.fail_on))
    except ReportWriteError as exc:
        stderr.write(f"gpu-pod-validate: error: {exc}\n")
        return EXIT_USAGE
    stdout.write((summary_line(summary) if args.quiet else format_text(report, summary, verbose=args.verbose)) + "\n")
    return EXIT_FAILED if failed(summary, args.fail_on) else EXIT_OK


def main() -> int:
    """The exit status for the command; the caller exits with it."""
    return run()
