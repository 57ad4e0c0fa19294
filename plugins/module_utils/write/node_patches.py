# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Guarded node patches, the one loop every feature that patches nodes runs on: each plan's JSON
patch sent (its `test` operations guard what it was decided on); when the node changed since it was
read (409, or 422 from a failed `test`) it is read again and decided again, up to
MAX_CONFLICT_ATTEMPTS patches; a failure that is not about one node stops the sending; a bounded
number in flight. The loop says what became of each plan in its own words (`Patched`); each feature
turns that into its result."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import Enum
from typing import Generic, Protocol, TypeVar

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import error_status
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.patches import MAX_CONFLICT_ATTEMPTS, JsonPatch

# The node is gone.
NODE_GONE = 404
# The node changed since it was read: 409 Conflict, or 422 when a `test` of the patch failed (the
# API server answers a JSON patch that does not apply with 422, as it answers an invalid object).
PATCH_REFUSED = 422
CHANGED_STATUSES = frozenset({409, PATCH_REFUSED})
# Statuses that concern one node only: the others (no answer, 401, 403, 429 or 5xx after the
# client's retries) mean the API server cannot take writes now, so sending more is pointless.
NODE_ONLY_STATUSES = frozenset({400, NODE_GONE, *CHANGED_STATUSES})


class NodePatchPlan(Protocol):
    """What the loop reads of a plan: the node's name and its patch (None: the node needs none)."""

    @property
    def name(self) -> str: ...

    @property
    def patch(self) -> JsonPatch | None: ...


PlanT = TypeVar("PlanT", bound=NodePatchPlan)
NodeT = TypeVar("NodeT")
ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")


class Patched(str, Enum):
    DONE = "done"  # the patch applied, or the plan as last decided needs none
    GONE = "gone"  # the node was deleted meanwhile
    FAILED = "failed"  # the API server refused the patch, or a read again failed
    KEPT_CHANGING = "kept_changing"  # the node changed again at every one of MAX_CONFLICT_ATTEMPTS patches
    NOT_ATTEMPTED = "not_attempted"  # not sent: the API server failed on another node first


@dataclass(frozen=True)
class PatchCalls(Generic[PlanT, NodeT]):
    """The node's I/O and the decision: send a patch, read the node again (None when it is gone),
    decide again on the node as read and the plan before; the errors that are answers of the API server."""

    send: Callable[[str, JsonPatch], object]
    reread: Callable[[str], NodeT | None]
    replan: Callable[[NodeT, PlanT], PlanT]
    errors: tuple[type[BaseException], ...] = (Exception,)


@dataclass(frozen=True)
class PatchResult(Generic[PlanT]):
    """A plan as last decided, what became of it, and for a failure the error, the status of the
    last answer and how many patches were sent."""

    plan: PlanT
    outcome: Patched = Patched.DONE
    error: str = ""
    status: int | None = None
    attempts: int = 0


def _failed(plan: PlanT, exc: BaseException, stop: threading.Event | None, attempts: int) -> PatchResult[PlanT]:
    status = error_status(exc)
    if status not in NODE_ONLY_STATUSES and stop is not None:
        stop.set()
    return PatchResult(plan, Patched.FAILED, str(exc), status, attempts)


def patch_node(plan: PlanT, calls: PatchCalls[PlanT, NodeT], stop: threading.Event | None = None) -> PatchResult[PlanT]:
    """One plan through the guarded loop; `stop`, shared by the plans of a run, is set by a failure
    that is not about one node and keeps the patches not sent yet from being sent."""
    attempt = 0
    while True:
        if plan.patch is None:
            return PatchResult(plan, attempts=attempt)
        if stop is not None and stop.is_set():
            return PatchResult(plan, Patched.NOT_ATTEMPTED, attempts=attempt)
        attempt += 1
        refused = plan.patch
        try:
            calls.send(plan.name, refused)
            return PatchResult(plan, attempts=attempt)
        except calls.errors as exc:
            status = error_status(exc)
            if status == NODE_GONE:
                return PatchResult(plan, Patched.GONE, str(exc), status, attempt)
            if status not in CHANGED_STATUSES:
                return _failed(plan, exc, stop, attempt)
            if attempt >= MAX_CONFLICT_ATTEMPTS:
                return PatchResult(plan, Patched.KEPT_CHANGING, str(exc), status, attempt)
            error = exc
        try:
            node = calls.reread(plan.name)
        except calls.errors as exc:
            return _failed(plan, exc, stop, attempt)
        if node is None:
            return PatchResult(plan, Patched.GONE, "", NODE_GONE, attempt)
        replanned = calls.replan(node, plan)
        if status == PATCH_REFUSED and replanned.patch == refused:
            # Nothing the patch depends on changed: the server refused the patch itself (an invalid value).
            return PatchResult(plan, Patched.FAILED, str(error), status, attempt)
        plan = replanned


def in_parallel(work: Callable[[ItemT], ResultT], items: Sequence[ItemT], parallelism: int) -> list[ResultT]:
    """`work` done on every item, at most `parallelism` at a time, the results in the items' order."""
    if not items:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(parallelism, len(items)))) as pool:
        return list(pool.map(work, items))


def patch_nodes(
    plans: Sequence[PlanT], calls: PatchCalls[PlanT, NodeT], parallelism: int = 16
) -> list[PatchResult[PlanT]]:
    """Every plan's patch, `parallelism` in flight; plans without one pass through. A failure that is
    not about one node (the API server is down, throttles beyond the retries, or forbids the write)
    stops the sending: the patches in flight finish, and the rest are not attempted."""
    stop = threading.Event()
    results = [PatchResult(plan) for plan in plans]
    pending = [index for index, plan in enumerate(plans) if plan.patch is not None]
    done = in_parallel(lambda index: patch_node(plans[index], calls, stop), pending, parallelism)
    for index, result in zip(pending, done, strict=True):
        results[index] = result
    return results
