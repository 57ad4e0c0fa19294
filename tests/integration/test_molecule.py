"""The Molecule scenarios of the roles (extensions/molecule), one test each, against the local cluster.

Each test runs `molecule test -s <scenario>` from the repository root, as a user would, with the
collection on ANSIBLE_COLLECTIONS_PATH and the cluster's kubeconfig in K8S_AUTH_KUBECONFIG. Beyond
the exit code, it checks that the steps that prove something really ran and passed: a step whose
playbook is missing is reported as such by molecule and not as a failure, so a scenario that lost
its check-mode or idempotence step would otherwise still pass.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import LocalCluster

from tests.collection import collections_root

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SCENARIO_DIR = REPO / "extensions" / "molecule"
SCENARIOS = (
    "preflight",
    "node_labels",
    "device_plugin_check",
    "pod_audit",
    "sample_workload",
    "admission_policy",
    "device_plugin",
    "gpu_failure",
)
MOLECULE = Path(sys.executable).with_name("molecule")
# Steps of the test sequence (extensions/molecule/config.yml) that must have run and passed.
REQUIRED_STEPS = ("syntax", "prepare", "check", "side_effect", "converge", "idempotence", "verify")
# Scenarios whose converge is a round trip, so that a second converge rightly changes the cluster
# again: their molecule.yml leaves idempotence out of the sequence and their verify checks instead
# that a rerun has nothing left to do.
ROUND_TRIPS = frozenset({"gpu_failure"})
ANSI = re.compile(r"\x1b\[[0-9;]*m")
COMPARED = re.compile(r"TASK \[Check mode changed nothing on the cluster\][^\n]*\n\s*ok: \[localhost\]")


def run_molecule(cluster: LocalCluster, scenario: str, ephemeral: Path) -> subprocess.CompletedProcess[str]:
    env = dict(
        os.environ,
        PATH=os.pathsep.join([str(MOLECULE.parent), os.environ.get("PATH", "")]),
        ANSIBLE_COLLECTIONS_PATH=str(collections_root()),
        K8S_AUTH_KUBECONFIG=str(cluster.kubeconfig),
        # Molecule's state and the generated inventory and ansible.cfg: outside the repository.
        MOLECULE_EPHEMERAL_DIRECTORY=str(ephemeral),
        NO_COLOR="1",
        ANSIBLE_NOCOLOR="1",
        # One stream, in order: molecule's step lines and the ansible-playbook output between them.
        PYTHONUNBUFFERED="1",
    )
    return subprocess.run(
        [str(MOLECULE), "test", "--scenario-name", scenario],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=900,
        check=False,
    )


def step_output(output: str, scenario: str, step: str) -> list[str]:
    """The output of each run of `step`, from its `Executing` line to its `Executed` line."""
    start = re.escape(f"[{scenario} > {step}] Executing")
    end = re.escape(f"[{scenario} > {step}] Executed:")
    return re.findall(rf"{start}\n(.*?){end}", output, re.DOTALL)


def recaps(text: str) -> list[dict[str, int]]:
    """The counts of each PLAY RECAP host line in `text`."""
    return [
        {key: int(value) for key, value in re.findall(r"(\w+)=(\d+)", line)}
        for line in re.findall(r"^localhost\s+:\s+(ok=.*)$", text, re.MULTILINE)
    ]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_scenario(cluster: LocalCluster, scenario: str, tmp_path: Path) -> None:
    assert (SCENARIO_DIR / scenario / "molecule.yml").is_file()
    done = run_molecule(cluster, scenario, tmp_path / "molecule")
    output = ANSI.sub("", done.stdout)
    assert done.returncode == 0, output[-12000:]

    required = [s for s in REQUIRED_STEPS if not (s == "idempotence" and scenario in ROUND_TRIPS)]
    for step in required:
        assert re.search(rf"^{re.escape(scenario)} > {step}: Executed: Successful$", output, re.MULTILINE), (
            f"step {step} did not run and pass:\n{output[-6000:]}"
        )

    # Idempotence ran converge a second time and its recap shows no change.
    if scenario in ROUND_TRIPS:
        assert not step_output(output, scenario, "idempotence"), "a round trip ran the idempotence step"
    else:
        (idempotence,) = step_output(output, scenario, "idempotence")
        counts = recaps(idempotence)
        assert counts, f"no play recap in the idempotence step:\n{idempotence}"
        assert all(c["changed"] == 0 and c["failed"] == 0 for c in counts), idempotence

    # The check step ran converge with --check, and the step after it compared the cluster with
    # what prepare recorded.
    (check,) = step_output(output, scenario, "check")
    assert recaps(check) and all(c["failed"] == 0 for c in recaps(check)), check
    (compared,) = step_output(output, scenario, "side_effect")
    assert COMPARED.search(compared), compared
