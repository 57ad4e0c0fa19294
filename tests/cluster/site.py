"""`make site`: playbooks/site.yml against the local simulated GPU cluster (built and started on first use), or
against the cluster of KUBECONFIG when it is set, after saying which cluster that is and what the run writes
there. Arguments after `--` (`make site ARGS="--check --diff -e kubegpu_strict=true"`) go to ansible-playbook.

    python -m tests.cluster.site [--yes] [--timeout SECONDS] [-- ANSIBLE_PLAYBOOK_ARGUMENTS...]
"""

from __future__ import annotations

import argparse
import os
import sys
import sysconfig
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from . import build, fleet
from . import cluster as local_cluster

REPO_ROOT = local_cluster.HERE.parents[1]
PLAYBOOK = REPO_ROOT / "playbooks" / "site.yml"


def role_defaults(role: str) -> dict[str, Any]:
    return yaml.safe_load((REPO_ROOT / "roles" / role / "defaults" / "main.yml").read_text()) or {}


def writes() -> list[str]:
    """What playbooks/site.yml writes to the cluster it runs against, with the roles' defaults."""
    labels, sample = role_defaults("node_labels"), role_defaults("sample_workload")
    return [
        f"labels every GPU node {labels['node_labels_key']}=<model> (and the annotation kubegpu.io/managed-labels)",
        f"creates the namespace {sample['sample_workload_namespace']} if it is missing, and in it the pod "
        f"{sample['sample_workload_name']} (image {sample['sample_workload_image']}, "
        f"{sample['sample_workload_gpus']} nvidia.com/gpu)",
    ]


CHECK_FLAGS = ("--check", "-C")


def kubeconfig_target(text: str, context: str | None = None) -> tuple[str, str]:
    """(context, server) of a kubeconfig's current (or the given) context, "?" where it says none."""
    try:
        config = yaml.safe_load(text) or {}
    except yaml.YAMLError:
        return context or "?", "? (the kubeconfig is not valid YAML)"
    if not isinstance(config, Mapping):
        return context or "?", "?"
    name = context or config.get("current-context") or "?"
    contexts = {c.get("name"): c.get("context") or {} for c in config.get("contexts") or [] if isinstance(c, Mapping)}
    clusters = {c.get("name"): c.get("cluster") or {} for c in config.get("clusters") or [] if isinstance(c, Mapping)}
    cluster = clusters.get(contexts.get(name, {}).get("cluster"), {})
    return str(name), str(cluster.get("server") or "?")


def announcement(kubeconfig: str, text: str, ansible_args: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """What `make site` says before it runs against a cluster that is not the local one."""
    paths = kubeconfig.split(os.pathsep)
    context, server = kubeconfig_target(text, env.get("K8S_AUTH_CONTEXT"))
    checking = any(a in CHECK_FLAGS for a in ansible_args)
    lines = [
        f"make site: KUBECONFIG is set, so this runs playbooks/site.yml against {server} "
        f"(context {context}, kubeconfig {paths[0]}), not the local cluster.",
        "In check mode it writes nothing; without --check it would:" if checking else "It writes there:",
        *(f"  - {what}" for what in writes()),
        "  and reads nodes, pods and workloads in every namespace (docs/security.md).",
    ]
    if len(paths) > 1:
        lines.append(f"  (only the first file of KUBECONFIG is read: {paths[0]})")
    overriding = sorted(
        k for k in env if k.startswith("K8S_AUTH_") and k not in ("K8S_AUTH_KUBECONFIG", "K8S_AUTH_CONTEXT")
    )
    if overriding:
        lines.append(f"  ({', '.join(overriding)} set in the environment: the modules take them over the kubeconfig's)")
    if not checking:
        lines.append('See first what it would change: make site ARGS="--check --diff".')
    lines.append("For the local cluster instead: env -u KUBECONFIG make site.")
    return lines


def confirmed(ask: bool) -> bool:
    """Whether to go on: always when not asked (--yes, or no terminal to ask on), else the answer."""
    if not ask:
        return True
    try:
        answer = input("Run it? [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def playbook_env(kubeconfig: str, base: Mapping[str, str], local: bool) -> dict[str, str]:
    """The environment of ansible-playbook: the collection, the kubeconfig, and for the local cluster no other
    K8S_AUTH_* variable of the caller's (a K8S_AUTH_HOST or K8S_AUTH_CONTEXT would send it elsewhere)."""
    env = {k: v for k, v in base.items() if not (local and k.startswith("K8S_AUTH_"))}
    return dict(
        env,
        ANSIBLE_COLLECTIONS_PATH=sysconfig.get_paths()["purelib"],
        K8S_AUTH_KUBECONFIG=kubeconfig.split(os.pathsep)[0],
        ANSIBLE_LOCALHOST_WARNING="false",
        ANSIBLE_INVENTORY_UNPARSED_WARNING="false",
    )


def local_kubeconfig(timeout: float) -> str:
    """The local cluster's admin kubeconfig, the cluster built and started if it is not running."""
    fleet_file = Path(os.environ.get("KUBEGPU_FLEET", local_cluster.HERE / "fleet.yaml"))
    build.say("make site: the local simulated GPU cluster (KUBECONFIG is not set)")
    try:
        return str(local_cluster.up(fleet_file, timeout))
    except (fleet.FleetError, local_cluster.ClusterStartError) as exc:
        sys.exit(f"error: {exc}\n(see Troubleshooting in docs/testing.md)")


def parse(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    own, ansible_args = list(argv), []
    if "--" in own:
        at = own.index("--")
        own, ansible_args = own[:at], own[at + 1 :]
    parser = argparse.ArgumentParser(prog="python -m tests.cluster.site", description=__doc__)
    parser.add_argument("--yes", action="store_true", help="run against KUBECONFIG's cluster without asking")
    parser.add_argument("--timeout", type=float, default=180, help="seconds to wait for the local cluster")
    return parser.parse_args(own), ansible_args


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> Any:
    args, ansible_args = parse(sys.argv[1:] if argv is None else argv)
    env = dict(os.environ if environ is None else environ)
    kubeconfig = env.get("KUBECONFIG", "")
    local = not kubeconfig
    if not local:
        first = Path(kubeconfig.split(os.pathsep)[0]).expanduser()
        try:
            text = first.read_text()
        except OSError as exc:
            sys.exit(f"make site: KUBECONFIG={kubeconfig}: cannot read {first}: {exc.strerror}")
        build.say("\n".join(announcement(kubeconfig, text, ansible_args, env)))
        if not confirmed(ask=not args.yes and sys.stdin.isatty()):
            sys.exit("make site: not run")
    else:
        kubeconfig = local_kubeconfig(args.timeout)
    command = [str(Path(sys.executable).parent / "ansible-playbook"), str(PLAYBOOK), *ansible_args]
    os.execve(command[0], command, playbook_env(kubeconfig, env, local))


if __name__ == "__main__":
    main()
