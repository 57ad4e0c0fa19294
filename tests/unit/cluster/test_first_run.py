"""What a first `make site` tells a newcomer: the build's progress, one line a binary with its time and the
expected total first; a Go that cannot build it named with where to get one; a port already taken named
with the variable that moves it; and, with KUBECONFIG set, which cluster it will write to and what."""

from __future__ import annotations

import os
import re
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.cluster import build, site, versions
from tests.cluster import cluster as local_cluster

REPO = Path(__file__).resolve().parents[3]


def fake_go(folder: Path, version: str = "go1.26.8") -> Path:
    """A `go` that prints `version` and, for `go build -o OUT`, writes OUT as an executable."""
    folder.mkdir(parents=True, exist_ok=True)
    go = folder / "go"
    go.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = version ]; then echo "go version {version} linux/amd64"; exit 0; fi\n'
        'while [ $# -gt 0 ]; do if [ "$1" = -o ]; then out="$2"; fi; shift; done\n'
        'case "$out" in */) exit 3;; esac\n'
        'printf "#!/bin/sh\\n" > "$out"; chmod +x "$out"\n'
    )
    go.chmod(go.stat().st_mode | stat.S_IXUSR)
    return go


def run_build(tmp_path: Path, go_version: str) -> subprocess.CompletedProcess:
    bin_dir = tmp_path / "go-bin"
    fake_go(bin_dir, go_version)
    env = dict(os.environ, KUBEGPU_CACHE=str(tmp_path / "cache"), PATH=f"{bin_dir}{os.pathsep}/usr/bin:/bin")
    env.pop("KUBEGPU_CLUSTER_BIN_DIR", None)
    return run([sys.executable, "-m", "tests.cluster", "build"], env)


def run(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_the_build_says_what_it_builds_one_line_a_binary_with_its_time(tmp_path: Path):
    done = run_build(tmp_path, "go1.26.8")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert "first use only" in lines[0] and build.FIRST_BUILD_ESTIMATE in lines[0]
    assert str(tmp_path / "cache" / "go") in lines[0]
    started = [line.split("] building ", 1)[1] for line in lines if line.startswith("[")]
    assert started == [f"{name} ..." for name in build_order()]
    done_lines = [line for line in lines if line.startswith("built ") and "binaries" not in line]
    assert [line.split()[1] for line in done_lines] == build_order()
    assert all(re.fullmatch(r"built \S+ in (\d+m)?\d+s", line) for line in done_lines), done_lines
    assert lines[-1].startswith(f"built the {len(versions.BINARIES)} binaries in ")
    out = Path(done.stdout.strip())
    assert sorted(p.name for p in out.iterdir()) == sorted(versions.BINARIES)


def build_order() -> list[str]:
    return [name for name, _module, _args in build.build_steps(Path("/out"))]


def test_every_binary_is_built_once(tmp_path: Path):
    assert sorted(build_order()) == sorted(versions.BINARIES)


def test_a_go_too_old_is_named_with_where_to_get_one(tmp_path: Path):
    done = run_build(tmp_path, "go1.19.8")
    assert done.returncode != 0
    assert "go1.19.8 linux/amd64 is older than Go 1.26.0" in done.stderr
    assert "https://go.dev/dl/" in done.stderr and "golang-go" in done.stderr
    assert "building" not in done.stderr


@pytest.mark.parametrize(
    ("found", "problem"),
    [
        (None, "no go command on PATH"),
        ("go version go1.25.3 linux/amd64", "older than Go 1.26.0"),
        ("go version go1.26 linux/arm64", "older than Go 1.26.0"),
        ("go version go1.26.0 linux/amd64", None),
        ("go version go1.27rc1 linux/amd64", None),
        ("something else", "older than Go 1.26.0"),
    ],
)
def test_go_problem(found, problem):
    said = build.go_problem(found, (1, 26, 0))
    assert (said is None) if problem is None else (problem in said)


def test_the_required_go_is_the_wrapper_modules():
    assert build.required_go() == (1, 26, 0)


def test_a_build_that_runs_long_says_so_while_it_runs(capsys):
    took = build.run_step("slow", [sys.executable, "-c", "import time; time.sleep(1.3)"], REPO, dict(os.environ), 0.5)
    said = capsys.readouterr().err.splitlines()
    assert said[0] == "building slow ..."
    assert len([line for line in said if line.startswith("  still building slow: ")]) >= 2
    assert said[-1] == f"built slow in {build.elapsed(took)}" and took >= 1.3


def test_a_port_in_use_is_named_with_its_variable():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        assert local_cluster.ports_in_use((("KUBEGPU_KWOK_PORT", port),)) == [("KUBEGPU_KWOK_PORT", port)]
    assert local_cluster.ports_in_use((("KUBEGPU_KWOK_PORT", port),)) == []


# --- make site against KUBECONFIG --------------------------------------------------------------

KUBECONFIG = {
    "apiVersion": "v1",
    "kind": "Config",
    "current-context": "prod",
    "contexts": [
        {"name": "prod", "context": {"cluster": "prod-gpu", "user": "admin"}},
        {"name": "staging", "context": {"cluster": "staging-gpu", "user": "admin"}},
    ],
    "clusters": [
        {"name": "prod-gpu", "cluster": {"server": "https://prod.example.com:6443"}},
        {"name": "staging-gpu", "cluster": {"server": "https://staging.example.com:6443"}},
    ],
}


def test_the_target_is_the_current_or_the_given_context():
    text = yaml.safe_dump(KUBECONFIG)
    assert site.kubeconfig_target(text) == ("prod", "https://prod.example.com:6443")
    assert site.kubeconfig_target(text, "staging") == ("staging", "https://staging.example.com:6443")
    assert site.kubeconfig_target("[", None)[1].startswith("?")


def test_the_announcement_names_the_cluster_and_every_write():
    said = "\n".join(site.announcement("/home/me/.kube/prod", yaml.safe_dump(KUBECONFIG), [], {}))
    assert "https://prod.example.com:6443 (context prod, kubeconfig /home/me/.kube/prod)" in said
    assert "accelerator=<model>" in said and "namespace gpu-samples" in said and "pod tensorflow-mnist" in said
    sample = yaml.safe_load((REPO / "roles" / "sample_workload" / "defaults" / "main.yml").read_text())
    assert sample["sample_workload_image"] in said
    assert 'make site ARGS="--check --diff"' in said
    checking = "\n".join(site.announcement("/k", yaml.safe_dump(KUBECONFIG), ["--check", "--diff"], {}))
    assert "In check mode it writes nothing" in checking
    env = {"K8S_AUTH_CONTEXT": "staging", "K8S_AUTH_HOST": "https://elsewhere:6443"}
    other = "\n".join(site.announcement("/k", yaml.safe_dump(KUBECONFIG), [], env))
    assert "https://staging.example.com:6443 (context staging" in other
    assert "(K8S_AUTH_HOST set in the environment: the modules take them over the kubeconfig's)" in other


def test_the_local_run_drops_the_callers_other_connection_variables():
    caller = {"K8S_AUTH_HOST": "https://elsewhere:6443", "K8S_AUTH_CONTEXT": "prod", "PATH": "/bin"}
    local = site.playbook_env("/state/admin.kubeconfig", caller, local=True)
    assert {k: v for k, v in local.items() if k.startswith("K8S_AUTH_")} == {
        "K8S_AUTH_KUBECONFIG": "/state/admin.kubeconfig"
    }
    assert local["PATH"] == "/bin"
    given = site.playbook_env("/k", caller, local=False)
    assert given["K8S_AUTH_HOST"] == "https://elsewhere:6443" and given["K8S_AUTH_KUBECONFIG"] == "/k"


def test_with_kubeconfig_set_and_no_answer_nothing_runs(tmp_path: Path, monkeypatch):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(KUBECONFIG))
    monkeypatch.setattr(site, "confirmed", lambda ask: False)
    monkeypatch.setattr(site.os, "execve", lambda *a: pytest.fail("ran ansible-playbook"))
    with pytest.raises(SystemExit, match="not run"):
        site.main(["--", "--check"], {"KUBECONFIG": str(kubeconfig)})


def test_arguments_after_the_separator_go_to_ansible_playbook(tmp_path: Path, monkeypatch):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(KUBECONFIG))
    ran = []
    monkeypatch.setattr(site.os, "execve", lambda path, argv, env: ran.append((argv, env)))
    site.main(["--yes", "--", "--check", "--diff", "-e", "kubegpu_strict=true"], {"KUBECONFIG": str(kubeconfig)})
    [(argv, env)] = ran
    assert argv[1:] == [str(site.PLAYBOOK), "--check", "--diff", "-e", "kubegpu_strict=true"]
    assert env["K8S_AUTH_KUBECONFIG"] == str(kubeconfig)


def test_an_unreadable_kubeconfig_is_named():
    with pytest.raises(SystemExit, match="KUBECONFIG=/nonexistent/kubeconfig: cannot read"):
        site.main([], {"KUBECONFIG": "/nonexistent/kubeconfig"})


def test_make_site_passes_args_and_the_timeout():
    dry = run(["make", "-n", "site", "ARGS=--check --diff -e a=b", "TIMEOUT=300"])
    assert dry.returncode == 0, dry.stderr
    assert "-m tests.cluster.site --timeout 300 -- --check --diff -e a=b" in dry.stdout
    up = run(["make", "-n", "cluster-up", "TIMEOUT=600"])
    assert "-m tests.cluster up --timeout 600" in up.stdout, up.stdout
