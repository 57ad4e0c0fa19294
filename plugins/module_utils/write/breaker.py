# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The breaker: never take more than a set share of a pool's GPUs out of service, pure.

A pool is one value of one dimension: a GPU model (`("model", "nvidia-a100")`) or the value of a
label users name, such as a node pool (`("cloud.google.com/gke-nodepool", "train")`). A candidate
(a node, or a device) belongs to every pool it is counted in; it is allowed only when, in each of
them, the GPUs already quarantined, those allowed before it in this run and its own stay within
`floor(max_share * total)`. Candidates are taken in the order given, so the caller decides who goes
first (the same order on every run). Candidates already quarantined are not candidates: the caller
counts them in `Pool.quarantined` instead.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError

MODEL_DIMENSION = "model"
DEFAULT_MAX_SHARE = 0.5

# (dimension, value): ("model", "nvidia-a100") or (a label key, its value on the node).
PoolKey = tuple[str, str]


@dataclass(frozen=True)
class Pool:
    """A pool's GPUs: all of them, and those already out of service (quarantined before this run)."""

    total: int
    quarantined: int = 0


@dataclass(frozen=True)
class Candidate:
    """Something to quarantine: its name, the GPUs it would take out, and the pools it counts in."""

    name: str
    gpus: int
    pools: tuple[PoolKey, ...]


@dataclass(frozen=True)
class Held:
    """A candidate the breaker held back: the first pool that would go over its share, and why."""

    name: str
    pool: PoolKey
    reason: str


@dataclass(frozen=True)
class BreakerVerdict:
    allowed: tuple[str, ...]
    held: tuple[Held, ...]
    # GPUs out of service per pool after the allowed candidates (already quarantined included).
    used: Mapping[PoolKey, int]
    limits: Mapping[PoolKey, int]


def describe_pool(pool: PoolKey) -> str:
    return f"{pool[0]}={pool[1]}"


def check_share(max_share: object, option: str = "max_share") -> float:
    """The share as a float in (0, 1]; an OptionError naming `option` otherwise."""
    if isinstance(max_share, bool) or not isinstance(max_share, (int, float)) or not 0 < max_share <= 1:
        raise OptionError(
            f"{option} must be a number above 0 and at most 1 (a share of a pool's GPUs), not {max_share!r}"
        )
    return float(max_share)


def pool_limit(pool: Pool, max_share: float) -> int:
    """The most GPUs of the pool that may be out of service at once."""
    # A share that lands a hair under a whole number by float rounding (0.3 * 10) still counts it.
    return math.floor(max_share * pool.total + 1e-9)


def count_pools(members: Iterable[tuple[Sequence[PoolKey], int, bool]]) -> dict[PoolKey, Pool]:
    """Pools from their members: (the pools a node or device counts in, its GPUs, whether it is quarantined)."""
    totals: dict[PoolKey, int] = {}
    out: dict[PoolKey, int] = {}
    for pools, gpus, quarantined in members:
        for key in dict.fromkeys(pools):
            totals[key] = totals.get(key, 0) + gpus
            out[key] = out.get(key, 0) + (gpus if quarantined else 0)
    return {key: Pool(totals[key], out[key]) for key in sorted(totals)}


def _held_reason(pool: PoolKey, used: int, gpus: int, total: int, limit: int, max_share: float) -> str:
    return (
        f"pool {describe_pool(pool)}: {used + gpus} of its {total} GPUs would be out of service, "
        f"above the breaker's share {max_share:g} (at most {limit}; {used} already)"
    )


def apply_breaker(pools: Mapping[PoolKey, Pool], candidates: Sequence[Candidate], max_share: float) -> BreakerVerdict:
    """Which candidates may be quarantined in this run, and which are held back with the reason."""
    share = check_share(max_share)
    unknown = sorted({key for c in candidates for key in c.pools if key not in pools})
    if unknown:
        raise ValueError("candidates count in pools that were not given: " + ", ".join(map(describe_pool, unknown)))
    limits = {key: pool_limit(pool, share) for key, pool in pools.items()}
    used = {key: pool.quarantined for key, pool in pools.items()}
    allowed: list[str] = []
    held: list[Held] = []
    for candidate in candidates:
        over = [key for key in dict.fromkeys(candidate.pools) if used[key] + candidate.gpus > limits[key]]
        if over:
            key = over[0]
            reason = _held_reason(key, used[key], candidate.gpus, pools[key].total, limits[key], share)
            held.append(Held(candidate.name, key, reason))
            continue
        for key in dict.fromkeys(candidate.pools):
            used[key] += candidate.gpus
        allowed.append(candidate.name)
    return BreakerVerdict(tuple(allowed), tuple(held), used, limits)
