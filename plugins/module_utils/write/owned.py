# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Objects the collection owns on the cluster (the admission policies, the device plugin's
DaemonSets and config), written one way for every feature that makes them:

- each object carries our mark, the managed-by label and the digest of its rendering (`marked`);
- each is read first (None when it is gone), and compared with what is rendered without a request
  (write/compare.py): create, update or unchanged;
- an object of our name that does not carry our mark is someone else's: nothing is written at all,
  and the refusal names it (`refused`, and `write` refuses before its first request);
- only what changes is sent, with server-side apply under the feature's field manager;
- only our objects are deleted; anyone else's are left alone, and named;
- each object that changes has its diff entry (write/diff.py).

A feature says which objects, in which order, and what it waits for; this module does the rest. In
check mode nothing is written and the plans say what would be."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import CheckFailed, error_context
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.managed import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    MANAGER,
    is_managed,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.paths import api_path
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.compare import differences, pruned, shown
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.diff import diff_entry
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.module import WriteRun

RENDERED_DIGEST_ANNOTATION = "kubegpu.io/rendered-sha256"
MARK = f"{MANAGED_BY_LABEL}={MANAGER}"

CREATE, UPDATE, UNCHANGED, DELETE = "create", "update", "unchanged", "delete"
# Someone else's object of our name: refused where we would apply it, left alone where we would delete it.
NOT_OURS, LEFT_ALONE = "not_ours", "left_alone"


@dataclass(frozen=True)
class Owner:
    """Who writes a feature's objects: the field manager of its applies, and the resource of each
    kind it writes (kind: plural name)."""

    field_manager: str
    resources: Mapping[str, str]

    def path(self, obj: Mapping[str, Any]) -> str:
        metadata = obj["metadata"]
        resource = self.resources[obj["kind"]]
        return api_path(obj["apiVersion"], resource, metadata["name"], namespace=metadata.get("namespace"))


def object_key(obj: Mapping[str, Any]) -> str:
    """`Kind namespace/name`, or `Kind name` for a cluster-scoped object: how results name an object."""
    metadata = obj["metadata"]
    where = f"{metadata['namespace']}/" if metadata.get("namespace") else ""
    return f"{obj['kind']} {where}{metadata['name']}"


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def marked(obj: dict[str, Any]) -> dict[str, Any]:
    """The object with our mark: the managed-by label, and the digest of everything else rendered
    (so that a field the rendering no longer sets still changes the object)."""
    metadata = obj["metadata"]
    metadata["labels"] = {**metadata.get("labels", {}), **MANAGED_BY}
    metadata["annotations"] = {**metadata.get("annotations", {}), RENDERED_DIGEST_ANNOTATION: digest(obj)}
    return obj


@dataclass(frozen=True)
class ObjectPlan:
    """What is done with one object: its key, the action, the rendering (None for a deletion), the
    object as read (None when it is gone) and the rendered fields the cluster does not hold."""

    key: str
    action: str
    desired: Mapping[str, Any] | None
    live: Mapping[str, Any] | None
    differences: tuple[str, ...] = ()

    @property
    def writes(self) -> bool:
        return self.action in (CREATE, UPDATE, DELETE)

    def diff(self) -> dict[str, Any]:
        """The diff entry: the cluster's values of the rendered fields and the rendering; of an object
        deleted, what it was."""
        if self.desired is None:
            return diff_entry(self.key, shown(self.live), {})
        return diff_entry(self.key, pruned(self.live, self.desired) or {}, self.desired)


def plan_apply(desired: Sequence[Mapping[str, Any]], live: Mapping[str, Mapping[str, Any] | None]) -> list[ObjectPlan]:
    """Per rendered object, by its key in `live` (the objects as read): create, update, unchanged, or
    not ours when an object of its name lacks our mark."""
    plans = []
    for obj in desired:
        key = object_key(obj)
        current = live.get(key)
        if current is None:
            plans.append(ObjectPlan(key, CREATE, obj, None))
            continue
        changed = tuple(differences(obj, current))
        action = NOT_OURS if not is_managed(current) else UPDATE if changed else UNCHANGED
        plans.append(ObjectPlan(key, action, obj, current, changed))
    return plans


def plan_delete(live: Mapping[str, Mapping[str, Any] | None]) -> list[ObjectPlan]:
    """Per object that exists, in the order given: deleted when it is ours, left alone when not."""
    return [
        ObjectPlan(key, DELETE if is_managed(current) else LEFT_ALONE, None, current)
        for key, current in live.items()
        if current is not None
    ]


def changed(plans: Iterable[ObjectPlan]) -> list[ObjectPlan]:
    """The plans that write (or would, in check mode)."""
    return [plan for plan in plans if plan.writes]


def keys_of(plans: Iterable[ObjectPlan], action: str) -> list[str]:
    return [plan.key for plan in plans if plan.action == action]


def refusal(keys: Sequence[str]) -> str:
    """Why nothing is written when objects of our names are someone else's."""
    names = ", ".join(keys)
    return (
        f"{names}: exists without the label {MARK}, so the collection did not make it; "
        "nothing was written (remove or rename it, or label it if it is the collection's)"
    )


def left_alone_warnings(plans: Iterable[ObjectPlan]) -> list[str]:
    return [f"{key} was not made by this collection: left as it is" for key in keys_of(plans, LEFT_ALONE)]


# The requests: every read and write of an owned object goes through these.


def read(client: KubeClient, owner: Owner, obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The object as the cluster holds it; None when it is gone."""
    with error_context(f"cannot read {object_key(obj)}"):
        return client.find(owner.path(obj))


def read_all(
    client: KubeClient, owner: Owner, objects: Iterable[Mapping[str, Any]]
) -> dict[str, dict[str, Any] | None]:
    """Each object as read, by its key, in the order given."""
    return {object_key(obj): read(client, owner, obj) for obj in objects}


def apply(client: KubeClient, owner: Owner, obj: Mapping[str, Any]) -> dict[str, Any]:
    with error_context(f"cannot apply {object_key(obj)}"):
        return client.apply(owner.path(obj), dict(obj), owner.field_manager)


def delete(client: KubeClient, owner: Owner, obj: Mapping[str, Any]) -> None:
    with error_context(f"cannot delete {object_key(obj)}"):
        client.delete(owner.path(obj))


def write(
    client: KubeClient, owner: Owner, plans: Sequence[ObjectPlan], check_mode: bool
) -> dict[str, Mapping[str, Any] | None]:
    """Send the plans' writes in order (none in check mode), after refusing them all when one object
    is not ours. Returns each object as the cluster holds it afterwards (in check mode, as it would:
    the rendering where it changes); None where it is deleted."""
    refused = keys_of(plans, NOT_OURS)
    if refused:
        raise CheckFailed(refusal(refused), result={"changes": [], "not_ours": refused})
    after: dict[str, Mapping[str, Any] | None] = {}
    for plan in plans:
        if plan.desired is None:
            if plan.action == DELETE and not check_mode:
                delete(client, owner, plan.live or {})
            after[plan.key] = None if plan.action == DELETE else plan.live
        elif plan.writes and not check_mode:
            after[plan.key] = apply(client, owner, plan.desired)
        else:
            after[plan.key] = plan.desired if plan.writes else plan.live
    return after


def plan(
    client: KubeClient,
    owner: Owner,
    desired: Sequence[Mapping[str, Any]],
    stale: Iterable[Mapping[str, Any]] = (),
) -> list[ObjectPlan]:
    """Read every object, then plan: the rendered ones applied where they change, in order, then the
    stale ones (objects no longer rendered) deleted where they are ours."""
    plans = plan_apply(desired, read_all(client, owner, desired))
    return plans + plan_delete(read_all(client, owner, stale))


def remove(client: KubeClient, owner: Owner, objects: Iterable[Mapping[str, Any]], check_mode: bool) -> WriteRun:
    """Every object of ours among `objects` deleted, in order; anyone else's left alone, named in
    `left_alone` and a warning each."""
    plans = plan_delete(read_all(client, owner, objects))
    write(client, owner, plans, check_mode)
    removed = changed(plans)
    result = {"changes": [p.key for p in removed], "left_alone": keys_of(plans, LEFT_ALONE)}
    return WriteRun(result, bool(removed), [p.diff() for p in removed], left_alone_warnings(plans))
