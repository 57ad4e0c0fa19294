# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu-pod-validate: the checks of the gpu_pod_validate module as a command line tool."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, BinaryIO, TextIO

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.components import (
    ComponentCatalogue,
    catalogue_from_option,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.batches import MANY_FILES, default_jobs
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.checker import RuleConfig, unknown_rules
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.images import image_env_map
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.junit import junit_xml
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.manifests import (
    DEFAULT_MAX_FILE_SIZE,
    HAS_YAML,
    STDIN_PATH,
    ManifestError,
    load_manifests,
    parse_text,
    read_text,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.parallel import usable_cpus
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.registry import RegistrySettings
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.registry_reads import registry_reader
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
    parser.add_argument(
        "paths",
        nargs="*",
        help="manifest files, directories or globs (YAML or JSON); - reads standard input, e.g. helm template ... | "
        "gpu-pod-validate -",
    )
    _add_rule_options(parser)
    _add_registry_options(parser)
    _add_output_options(parser)
    parser.add_argument("--list-rules", action="store_true", help="print the rules and exit")
    return parser


def _add_rule_options(parser: argparse.ArgumentParser) -> None:
    """What is judged and how: the failing severity, skipped rules, GPU names, images, allowances."""
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
        "--system-components",
        metavar="FILE",
        help="a YAML or JSON list of more GPU system components ({name, images, commands}) whose findings are "
        "allowed, or a map {builtin: true|false, extra: [...]}",
    )
    parser.add_argument(
        "--no-system-components",
        action="store_true",
        help="judge the known GPU system components (device plugins, GPU Operator operands...) like any workload",
    )


def _add_registry_options(parser: argparse.ArgumentParser) -> None:
    """The optional read of each image's config from its registry (gpu_pod_validate's image_registry)."""
    group = parser.add_argument_group("image registry (off by default: the check stays offline)")
    group.add_argument(
        "--registry-read",
        action="store_true",
        help="read each image's config from its registry: its NVIDIA_VISIBLE_DEVICES decides KGPU501",
    )
    timeout, budget = RegistrySettings.timeout, RegistrySettings.budget
    group.add_argument(
        "--registry-timeout", type=float, default=timeout, metavar="S", help=f"seconds per request ({timeout:g})"
    )
    group.add_argument(
        "--registry-budget", type=float, default=budget, metavar="S", help=f"seconds for all reads ({budget:g})"
    )
    group.add_argument(
        "--insecure-registry", action="append", default=[], metavar="HOST:PORT", help="a registry read over HTTP"
    )
    group.add_argument("--registry-cache-dir", metavar="DIR", help="keep the configs read here, by digest")
    group.add_argument("--docker-config", metavar="FILE", help="a pull secret's .dockerconfigjson for credentials")


def registry_option(args: argparse.Namespace) -> dict[str, Any]:
    """The CLI's registry flags as gpu_pod_validate's image_registry option."""
    return dict(
        read=args.registry_read,
        timeout=args.registry_timeout,
        budget=args.registry_budget,
        insecure_registries=args.insecure_registry,
        cache_dir=args.registry_cache_dir,
        docker_config=args.docker_config,
    )


def _add_output_options(parser: argparse.ArgumentParser) -> None:
    """How much is read, by how many workers, and where the reports go."""
    parser.add_argument(
        "--max-file-size",
        type=int,
        default=DEFAULT_MAX_FILE_SIZE,
        metavar="BYTES",
        help=f"skip larger files with an error (default: {DEFAULT_MAX_FILE_SIZE})",
    )
    parser.add_argument(
        "-j",
        "--jobs",
        type=int,
        metavar="N",
        help=f"files parsed and checked in N worker processes, with the same output (default: the CPU count from "
        f"{MANY_FILES} files on, else 1)",
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


def split_ids(values: Sequence[str]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def read_data_file(path: str, max_size: int, flag: str, empty: Any) -> Any:
    """The first document of a YAML or JSON file a flag names (`empty` for an empty file)."""
    try:
        documents, error = parse_text(read_text(path, max_size), path, as_json=path.lower().endswith(".json"))
    except ManifestError as exc:
        raise UsageError(f"{flag} {path}: {exc.message}") from exc
    if error:
        raise UsageError(f"{flag} {path}: {error.message}")
    return documents[0].data if documents else empty


def load_image_env(path: str, max_size: int) -> dict[str, dict[str, str]]:
    return image_env_map(read_data_file(path, max_size, "--image-env", {}), f"--image-env {path}")


def load_system_components(args: argparse.Namespace) -> ComponentCatalogue:
    """The catalogue the flags choose: the built-in one unless --no-system-components, plus the file's."""
    option: dict[str, Any] = {"builtin": not args.no_system_components}
    if args.system_components:
        path = args.system_components
        where = f"--system-components {path}"
        data = read_data_file(path, args.max_file_size, "--system-components", [])
        if isinstance(data, dict):
            option = {**data, "builtin": False} if args.no_system_components else dict(data)
        else:
            option["extra"] = data
        return catalogue_from_option(option, where)
    return catalogue_from_option(option, "--no-system-components")


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
        components=load_system_components(args),
    )


def run(
    argv: Sequence[str] | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    stdin: BinaryIO | None = None,
) -> int:
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
        if args.jobs is not None and args.jobs < 1:
            raise UsageError("--jobs must be 1 or more")
        if not HAS_YAML:
            raise UsageError("PyYAML is required (pip install PyYAML)")
        reader = registry_reader(registry_option(args))
        config = replace(rule_config(args), image_reader=reader)
    except OptionError as exc:
        stderr.write(f"gpu-pod-validate: error: {exc}\n")
        return EXIT_USAGE

    if stdin is None and STDIN_PATH in args.paths:
        stdin = sys.stdin.buffer
    manifests = load_manifests(args.paths, None, args.max_file_size, stdin)
    jobs = args.jobs if args.jobs is not None else default_jobs(len(manifests.paths), usable_cpus())
    report = offline_report(manifests, config, jobs if reader is None else 1)
    report.notes.extend(reader.notes if reader is not None else ())
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
