# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""From what the source knew of each GPU node and what it sees now, the health transitions to emit,
as events a rulebook can act on. Pure.

- A node's health class (healthy, unknown, degraded, failed) is compared, never its object: a
  heartbeat changes nothing that is compared, so it gives no event.
- A new node gives an event only when it is not healthy (``from`` is None); a deleted GPU node
  gives one whose ``to`` is ``deleted``.
- After a watch expired (410 Gone) the source lists again: ``relist`` compares what it knew with
  the fresh list and gives each node that changed meanwhile exactly one event, and every deletion.
- Each event says the share of its pool already out (GPUs on nodes that are not healthy or are
  cordoned) and whether the quarantine's breaker would hold the node back, counted as the
  quarantine playbook counts (write/breaker.py).
- A node that carries the collection's quarantine record and has been healthy for the hold time
  gives one ``healthy_for`` event: the release rulebook's cue.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.events.views import (
    NodeView,
    ViewOptions,
    problem_entry,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.health_table import HEALTHY
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.breaker import (
    Candidate,
    apply_breaker,
    count_pools,
    describe_pool,
)

SOURCE_NAME = "kubegpu.scheduling.gpu_health"
TRANSITION = "transition"
HEALTHY_FOR = "healthy_for"
SOURCE_STATUS = "source_status"
DELETED = "deleted"
# How the source came to see a change: in the first list, on the watch, or in the list after a watch expired.
SEEN_IN_LIST = "list"
SEEN_ON_WATCH = "watch"
SEEN_IN_RELIST = "relist"


@dataclass(frozen=True)
class Change:
    """A node's health class changed: ``before`` None for a node not known before, ``after`` None
    for a node that is gone."""

    node: str
    before: NodeView | None
    after: NodeView | None

    @property
    def from_health(self) -> str | None:
        return self.before.health if self.before else None

    @property
    def to_health(self) -> str:
        return self.after.health if self.after else DELETED


def change_of(before: NodeView | None, after: NodeView | None) -> Change | None:
    """The transition between two views of one node, or None when its health class is the same."""
    if before is None and after is None:
        return None
    if after is None:
        return Change(before.name if before else "", before, None)
    if before is None:
        return Change(after.name, None, after) if after.health != HEALTHY else None
    return Change(after.name, before, after) if before.health != after.health else None


def observe(known: MutableMapping[str, NodeView], name: str, view: NodeView | None) -> Change | None:
    """Record what the watch said of one node (None: deleted, or no longer a GPU node) and return its
    transition, if any. A view equal to the known one is not stored again."""
    before = known.get(name)
    if view is None:
        known.pop(name, None)
    elif view != before:
        known[name] = view
    return change_of(before, view)


def relist(known: Mapping[str, NodeView], fresh: Iterable[NodeView]) -> tuple[dict[str, NodeView], list[Change]]:
    """What is known after a fresh list, and the transitions that happened between the two, by node
    name: each changed node once, a node gone as deleted, a new node only when it is not healthy."""
    now = {view.name: view for view in fresh}
    changes = [change_of(known.get(name), now.get(name)) for name in sorted(known.keys() | now.keys())]
    return now, [change for change in changes if change is not None]


# --- the pool --------------------------------------------------------------------------------------


def pool_out(known: Mapping[str, NodeView], view: NodeView) -> dict[str, Any]:
    """The node's first pool (as the quarantine playbook's breaker names it: model=..., or label=value):
    its GPUs, those on nodes not healthy or cordoned, and their share."""
    if not view.pools:
        return {"pool": None, "pool_gpus": 0, "pool_gpus_out": 0, "pool_share_out": 0.0}
    key = view.pools[0]
    total = out = 0
    for other in known.values():
        if key in other.pools:
            total += other.gpus
            out += other.gpus if other.health != HEALTHY or other.out_of_service else 0
    return {
        "pool": describe_pool(key),
        "pool_gpus": total,
        "pool_gpus_out": out,
        "pool_share_out": round(out / total, 4) if total else 0.0,
    }


def breaker_verdict(known: Mapping[str, NodeView], view: NodeView, max_share: float) -> str | None:
    """Why the quarantine's breaker would hold this node back now, or None when it would let it go
    (a node cordoned or quarantined already takes no more GPUs out of service)."""
    if view.out_of_service or not view.pools:
        return None
    others = [(v.pools, v.gpus, v.out_of_service and v.name != view.name) for v in known.values()]
    if view.name not in known:
        others.append((view.pools, view.gpus, False))
    verdict = apply_breaker(count_pools(others), [Candidate(view.name, view.gpus, view.pools)], max_share)
    return verdict.held[0].reason if verdict.held else None


# --- events ----------------------------------------------------------------------------------------


def node_fields(known: Mapping[str, NodeView], view: NodeView, options: ViewOptions) -> dict[str, Any]:
    held = breaker_verdict(known, view, options.max_share)
    return {
        "gpus": view.gpus,
        "cordoned": view.cordoned,
        "quarantined": view.quarantined,
        "problems": [problem_entry(p) for p in view.problems],
        **pool_out(known, view),
        "max_share": options.max_share,
        "breaker_holds": held is not None,
        "breaker": held or "",
    }


# Kept out of the summary, which the rulebooks give the quarantine as its reason: the API server writes
# them escaped (\u003c) when it serves the record, so the release's guarded patch would never match it.
_ESCAPED = str.maketrans({"<": "(", ">": ")", "&": "+"})


def summary(change: Change) -> str:
    """One line: the node, its classes, and the titles of its problems."""
    problems = [problem_entry(p)["title"] for p in (change.after.problems if change.after else ())]
    said = f": {'; '.join(problems)}" if problems else ""
    return f"GPU node {change.node} {change.from_health or 'new'} to {change.to_health}{said}".translate(_ESCAPED)


def transition_event(
    change: Change, known: Mapping[str, NodeView], options: ViewOptions, seen: str, act: bool
) -> dict[str, Any]:
    """The event of one transition (``known`` as it is after it)."""
    view = change.after or change.before
    if view is None:
        raise ValueError("a change without a view before or after")
    fields = node_fields(known, view, options)
    if change.after is None:
        fields.update(problems=[], breaker_holds=False, breaker="")
    return {
        "type": TRANSITION,
        "source": SOURCE_NAME,
        "node": change.node,
        "from": change.from_health,
        "to": change.to_health,
        "seen": seen,
        "summary": summary(change),
        "act": act,
        **fields,
    }


def source_status_event(status: str, message: str, act: bool, retry_in: float | None = None) -> dict[str, Any]:
    """What the source says of itself: the API server unreachable (with when it tries again), or reached again."""
    event: dict[str, Any] = {"type": SOURCE_STATUS, "source": SOURCE_NAME, "status": status, "message": message}
    if retry_in is not None:
        event["retry_in"] = round(retry_in, 1)
    return {**event, "act": act}


# --- the hold before a release ---------------------------------------------------------------------


@dataclass
class Holds:
    """Since when (the caller's clock) each node has been healthy while quarantined by the collection,
    and the nodes whose ``healthy_for`` event was given already (once per stretch)."""

    since: dict[str, float] = field(default_factory=dict)
    given: set[str] = field(default_factory=set)


def holding(view: NodeView | None) -> bool:
    """Whether the node waits for its release: healthy, and quarantined by the collection."""
    return view is not None and view.health == HEALTHY and view.quarantined


def update_hold(holds: Holds, name: str, view: NodeView | None, now: float) -> None:
    """Start the node's stretch when it begins to wait for its release, end it when it stops."""
    if holding(view):
        holds.since.setdefault(name, now)
    else:
        holds.since.pop(name, None)
        holds.given.discard(name)


def due(holds: Holds, now: float, hold: float) -> list[str]:
    """The nodes whose stretch has lasted ``hold`` seconds and whose event is not given yet, marked given."""
    names = sorted(n for n, start in holds.since.items() if n not in holds.given and now - start >= hold)
    holds.given.update(names)
    return names


def next_due(holds: Holds, hold: float) -> float | None:
    """When (the caller's clock) the next stretch reaches the hold, or None when none is running."""
    starts = [start for name, start in holds.since.items() if name not in holds.given]
    return min(starts) + hold if starts else None


def healthy_for_event(
    view: NodeView, known: Mapping[str, NodeView], options: ViewOptions, held_for: float, act: bool
) -> dict[str, Any]:
    return {
        "type": HEALTHY_FOR,
        "source": SOURCE_NAME,
        "node": view.name,
        "from": view.health,
        "to": view.health,
        "healthy_for": round(held_for, 1),
        "summary": f"GPU node {view.name} healthy for {held_for:.0f} s while quarantined by the collection",
        "act": act,
        **node_fields(known, view, options),
    }
