# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Generate a manifest corpus for bench_validate.py: N Deployments in M multi-document files.

Each file also holds one ConfigMap of its namespace. About 87% of the Deployments run on CPUs,
10% request GPUs the right way, and 3% bypass the scheduler (env all, env index, privileged,
requests without limits, envFrom a ConfigMap with prefix NVIDIA_, init container env), in turn.
The output is deterministic for a given seed.

    python -m bench.validate_corpus OUT_DIR [--deployments 5000] [--files 50] [--seed 1]
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

import yaml

BYPASSES = ("env-all", "env-index", "privileged", "requests-only", "env-from", "init-env")
CPU_IMAGES = ("nginx:1.27", "python:3.12-slim", "redis:7.4", "ghcr.io/example/api:2.3.1", "busybox:1.36")
GPU_IMAGES = (
    "nvidia/cuda:12.4.1-base-ubuntu22.04",
    "nvcr.io/nvidia/pytorch:24.05-py3",
    "registry.example.com/ml/trainer:1.8",
)


class PlainDumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """Writes shared dicts out in full, as Helm and kustomize output does, never as YAML aliases."""

    def ignore_aliases(self, data: object) -> bool:
        return True


def namespace_of(file_index: int) -> str:
    return f"team-{file_index:03d}"


def config_map(file_index: int) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "gpu-settings", "namespace": namespace_of(file_index), "labels": {"app": "settings"}},
        "data": {
            "VISIBLE_DEVICES": "all",
            "LOG_LEVEL": "info",
            "FEATURE_FLAGS": "a,b,c",
            "settings.json": '{"retries": 3, "timeout": 30}',
        },
    }


def container(name: str, image: str, rng: random.Random) -> dict:
    port = rng.choice((8080, 8443, 9000, 5000))
    return {
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/sh", "-c"],
        "args": [f"exec /app/server --port={port} --workers={rng.randint(1, 8)}"],
        "ports": [{"name": "http", "containerPort": port, "protocol": "TCP"}],
        "env": [
            {"name": "APP_ENV", "value": rng.choice(("prod", "staging", "dev"))},
            {"name": "LOG_LEVEL", "value": "info"},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "CACHE_URL", "value": f"redis://cache-{rng.randint(1, 9)}:6379/0"},
            {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}},
        ],
        "resources": {
            "requests": {"cpu": f"{rng.choice((100, 250, 500))}m", "memory": f"{rng.choice((128, 256, 512))}Mi"},
            "limits": {"cpu": f"{rng.choice((1, 2))}", "memory": f"{rng.choice((512, 1024))}Mi"},
        },
        "readinessProbe": {
            "httpGet": {"path": "/healthz", "port": port},
            "initialDelaySeconds": 5,
            "periodSeconds": 10,
        },
        "livenessProbe": {
            "httpGet": {"path": "/livez", "port": port},
            "initialDelaySeconds": 15,
            "periodSeconds": 20,
            "failureThreshold": 3,
        },
        "securityContext": {
            "runAsNonRoot": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": True,
        },
        "volumeMounts": [
            {"name": "config", "mountPath": "/etc/app", "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }


def deployment(index: int, file_index: int, variant: str, rng: random.Random) -> dict:
    name = f"svc-{index:05d}"
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "bench", "tier": rng.choice(("web", "api"))}
    main = container("main", rng.choice(GPU_IMAGES if variant != "cpu" else CPU_IMAGES), rng)
    spec: dict = {
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30,
        "containers": [main],
        "volumes": [{"name": "config", "configMap": {"name": "app-config"}}, {"name": "tmp", "emptyDir": {}}],
        "affinity": {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "labelSelector": {"matchLabels": {"app.kubernetes.io/name": name}},
                            "topologyKey": "kubernetes.io/hostname",
                        },
                    }
                ]
            }
        },
    }
    if variant != "cpu":
        spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
        spec["nodeSelector"] = {"accelerator": "nvidia-tesla-t4"}
        main["resources"]["limits"]["nvidia.com/gpu"] = 1
    if variant == "env-all":
        main["env"].append({"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"})
        del main["resources"]["limits"]["nvidia.com/gpu"]
    elif variant == "env-index":
        main["env"].append({"name": "NVIDIA_VISIBLE_DEVICES", "value": "0,1"})
        del main["resources"]["limits"]["nvidia.com/gpu"]
    elif variant == "privileged":
        main["securityContext"] = {"privileged": True}
        del main["resources"]["limits"]["nvidia.com/gpu"]
    elif variant == "requests-only":
        del main["resources"]["limits"]["nvidia.com/gpu"]
        main["resources"]["requests"]["nvidia.com/gpu"] = 1
    elif variant == "env-from":
        main["envFrom"] = [{"prefix": "NVIDIA_", "configMapRef": {"name": "gpu-settings"}}]
        del main["resources"]["limits"]["nvidia.com/gpu"]
    elif variant == "init-env":
        init = container("init", "busybox:1.36", rng)
        init["env"].append({"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"})
        spec["initContainers"] = [init]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": namespace_of(file_index),
            "labels": labels,
            "annotations": {
                "deployment.kubernetes.io/revision": str(rng.randint(1, 40)),
                "example.com/owner": f"team-{file_index:03d}@example.com",
            },
        },
        "spec": {
            "replicas": rng.randint(1, 5),
            "revisionHistoryLimit": 5,
            "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}},
            "template": {"metadata": {"labels": labels, "annotations": {"prometheus.io/scrape": "true"}}, "spec": spec},
        },
    }


def variant_of(index: int) -> str:
    # Per 100 Deployments: 3 bypasses, 10 proper GPU users, 87 CPU services.
    slot = index % 100
    if slot in (17, 50, 83):
        return BYPASSES[(index // 100 * 3 + (17, 50, 83).index(slot)) % len(BYPASSES)]
    return "gpu" if slot % 10 == 5 else "cpu"


def generate(out: Path, deployments: int, files: int, seed: int = 1) -> list[Path]:
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    per_file = -(-deployments // files)
    written = []
    for file_index in range(files):
        first = file_index * per_file
        docs = [config_map(file_index)] + [
            deployment(i, file_index, variant_of(i), rng) for i in range(first, min(first + per_file, deployments))
        ]
        path = out / f"manifests-{file_index:03d}.yaml"
        path.write_text(yaml.dump_all(docs, Dumper=PlainDumper, sort_keys=False))
        written.append(path)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--deployments", type=int, default=5000)
    parser.add_argument("--files", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    paths = generate(args.out, args.deployments, args.files, args.seed)
    size = sum(p.stat().st_size for p in paths)
    print(f"{args.deployments} Deployments in {len(paths)} files, {size / 1e6:.1f} MB, in {args.out}")


if __name__ == "__main__":
    main()
