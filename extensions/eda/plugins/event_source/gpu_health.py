# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""kubegpu.scheduling.gpu_health: an Event-Driven Ansible source of GPU node health transitions.

It lists the cluster's Nodes, then watches them (``watch=1&resourceVersion=RV&allowWatchBookmarks=true``),
judges each GPU node's health class as the health view of gpu_node_facts does (the node conditions and
taints of the health table, GPUs withdrawn or fewer than expected), and puts an event on the queue only
when a node's class changes: a heartbeat changes nothing that is compared and gives no event.

Events (``event.type``):

- ``transition``: ``node``, ``pool`` (as the quarantine's breaker names it, ``model=...``), ``from``,
  ``to`` (healthy, unknown, degraded, failed, or deleted), ``problems``, ``summary``, ``gpus``,
  ``cordoned``, ``quarantined`` (the collection's record is on the node), ``pool_gpus``,
  ``pool_gpus_out`` and ``pool_share_out`` (GPUs of the pool on nodes not healthy or cordoned),
  ``max_share``, ``breaker_holds`` and ``breaker`` (the quarantine's breaker would hold the node back,
  and why), ``seen`` (list, watch, or relist after the watch expired), ``act``.
- ``healthy_for``: a node quarantined by the collection has stayed healthy for ``release_hold`` seconds.
- ``device_transition``: where the API serves ResourceSlices (resource.k8s.io/v1), a DRA GPU device's class
  changed by its slice's taints or a DeviceTaintRule: ``node``, ``device`` (driver, pool, name), ``from``,
  ``to``, ``taints``.
- ``source_status``: ``status`` watching (once, when the first watch is open), api_unreachable (with
  ``retry_in``) or api_reachable.

Arguments: the connection options of the collection's modules (``kubeconfig``, ``context``, ``host``,
``api_key``, ``ca_cert``, ``client_cert``, ``client_key``, ``validate_certs``, ... and their
``K8S_AUTH_*`` variables), ``pool_by`` (default [model]), ``max_share`` (0.5, as the quarantine
playbook), ``release_hold`` (seconds, 600), ``act`` (false: copied into each event; the collection's
rulebooks act only when it is true), ``initial`` (true: the nodes found not healthy at start give an
event), ``watch_timeout`` (300), ``page_size`` (500), ``retry_max`` (60: the longest wait between tries
while the API server cannot be reached).

Every API call runs in a thread (the list through ``asyncio.to_thread``, each watch in a daemon thread
that hands its lines to the event loop), so the loop never blocks. A watch that ends is resumed from
the last resource version (bookmarks keep it recent); a watch that expired (410 Gone) is followed by a
new list, compared with what was known: only the transitions that happened meanwhile are emitted. An API
server that cannot be reached is tried again with back-off and reported, never a crash.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_COLLECTION = ("ansible_collections", "kubegpu", "scheduling")


def _collections_importable() -> None:
    """Make ``ansible_collections.kubegpu.scheduling`` importable: from the collection this file is part of
    (ansible-rulebook runs it by path from ANSIBLE_COLLECTIONS_PATH), else from where Python finds it
    (this checkout linked into the venv), else from Ansible's collection paths."""
    here = os.path.abspath(__file__).split(os.sep)
    if len(here) > 9 and tuple(here[-9:-6]) == _COLLECTION:
        root = os.sep.join(here[:-9]) or os.sep
        if root not in sys.path:
            sys.path.insert(0, root)
        return
    try:
        __import__("ansible_collections.kubegpu.scheduling.plugins.module_utils.events")
        return
    except ImportError:
        pass
    configured = os.environ.get("ANSIBLE_COLLECTIONS_PATH") or os.environ.get("ANSIBLE_COLLECTIONS_PATHS") or ""
    paths = [p for p in configured.split(os.pathsep) if p]
    paths += [os.path.expanduser("~/.ansible/collections"), "/usr/share/ansible/collections"]
    for path in paths:
        if os.path.isdir(os.path.join(path, *_COLLECTION)) and path not in sys.path:
            sys.path.append(path)


_collections_importable()

import urllib3  # noqa: E402  (after the path is set, with the collection's own imports)

from ansible_collections.kubegpu.scheduling.plugins.module_utils.events.devices import (  # noqa: E402
    device_changes,
    device_event,
    device_views,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.events.stream import (  # noqa: E402
    BOOKMARK,
    DELETED,
    ERROR,
    NODES_PATH,
    SourceArgs,
    error_text,
    expired,
    list_query,
    resource_version,
    retry_wait,
    source_args,
    split_lines,
    watch_event,
    watch_query,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.events.transitions import (  # noqa: E402
    SEEN_IN_LIST,
    SEEN_IN_RELIST,
    SEEN_ON_WATCH,
    Holds,
    due,
    healthy_for_event,
    next_due,
    observe,
    relist,
    source_status_event,
    transition_event,
    update_hold,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.events.views import NodeView, view_of  # noqa: E402
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import (  # noqa: E402
    DEVICE_TAINT_RULES,
    RESOURCE_API_VERSION,
    RESOURCE_SLICES,
    project_slice,
    project_taint_rule,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import (  # noqa: E402
    KubeClient,
    client_from_params,
    decode_json,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import (  # noqa: E402
    ClusterError,
    KubegpuError,
    describe_api_error,
    describe_connection_error,
)

LOG = logging.getLogger("kubegpu.scheduling.gpu_health")
UNREACHABLE = "api_unreachable"
REACHABLE = "api_reachable"
WATCHING = "watching"


class Expired(Exception):
    """The resource version is too old for a watch (410 Gone): list again."""


@dataclass
class Feed:
    """One kind of object the source lists and watches: its API path, how an object is projected (None: not
    one the source follows), the resource version to resume from, and whether it was listed once."""

    what: str
    path: str
    project: Callable[[dict[str, Any]], Any]
    version: str | None = None
    listed: bool = False
    attempt: int = 0


def list_all(client: KubeClient, feed: Feed, page_size: int) -> tuple[dict[str, Any], str]:
    """Every object of the feed, projected, by name, and the list's resource version, page by page (in a thread)."""
    found: dict[str, Any] = {}
    token: str | None = None
    version = ""
    while True:
        page = client.get(feed.path, query=list_query(page_size, token))
        metadata = page.get("metadata") or {}
        version = version or str(metadata.get("resourceVersion") or "")
        for item in page.get("items") or []:
            projected = feed.project(item)
            if projected is not None:
                found[str(item["metadata"]["name"])] = projected
        token = metadata.get("continue") or None
        if not token:
            return found, version


def served(client: KubeClient, group_version: str) -> set[str]:
    """The resources an API group version serves; none when the API server does not serve it (in a thread)."""
    found = client.find(f"/apis/{group_version}")
    return {str(r.get("name")) for r in (found or {}).get("resources") or []}


def open_watch(client: KubeClient, path: str, query: dict[str, Any], read_timeout: float) -> Any:
    """The streamed answer of a watch, through the modules' client (its configuration, credentials and
    pool); an HTTP error is a ClusterError, a 410 is Expired."""
    headers = client._headers("application/json", None)  # the client's own credentials and headers
    pool = client.api_client.rest_client.pool_manager
    client.request_count += 1
    response = pool.request(
        "GET",
        client._url(path, query),
        headers=headers,
        preload_content=False,
        retries=False,
        timeout=urllib3.Timeout(connect=client.timeout, read=read_timeout),
    )
    if response.status < 400:
        return response
    body = response.read().decode("utf-8", "replace")
    response.release_conn()
    if response.status == 410:
        raise Expired(body)
    raise ClusterError(describe_api_error(response.status, response.reason, body, "GET", path), response.status)


class WatchReader(threading.Thread):
    """One watch, read in its own thread: each event handed to the loop as (type, name, projected, version),
    and at the end ("END", exception or None)."""

    def __init__(self, client: KubeClient, feed: Feed, timeout: int, hand: Callable[[tuple], object]) -> None:
        super().__init__(name=f"gpu_health-watch-{feed.what}", daemon=True)
        self.client, self.feed, self.timeout, self.hand = client, feed, timeout, hand
        self.version = feed.version or ""
        self.stop = threading.Event()
        self.response: Any = None

    def run(self) -> None:
        failure: BaseException | None = None
        try:
            self.read()
        except Exception as exc:  # handed to the loop, which says what it was and tries again
            failure = exc
        if not self.stop.is_set():
            self.hand(("END", failure))

    def close(self) -> None:
        """Stop reading: the blocked read ends when the connection is shut down."""
        self.stop.set()
        shutdown = getattr(self.response, "shutdown", None)  # urllib3 2.3 and newer
        if shutdown is not None and self.is_alive():
            with contextlib.suppress(OSError, RuntimeError):  # RuntimeError: the read has just ended
                shutdown()

    def read(self) -> None:
        query = watch_query(self.version, self.timeout)
        self.response = response = open_watch(self.client, self.feed.path, query, self.timeout + 30)
        self.hand(("OPEN", None))
        pending = b""
        try:
            for chunk in response.stream(65536):
                lines, pending = split_lines(pending, chunk)
                for line in lines:
                    self.line(line)
                if self.stop.is_set():
                    return
        finally:
            response.release_conn()

    def line(self, line: bytes) -> None:
        kind, item = watch_event(line, decode_json)
        if expired(kind, item):
            raise Expired(error_text(item))
        if kind == ERROR:
            raise ClusterError(f"the watch of {self.feed.path} ended: {error_text(item)}")
        version = resource_version(item)
        if kind == BOOKMARK:
            self.hand((kind, "", None, version))
            return
        name = str((item.get("metadata") or {}).get("name") or "")
        self.hand((kind, name, None if kind == DELETED else self.feed.project(item), version))


class GpuHealthSource:
    """The source's state: what it knows of each GPU node and DRA device, the release holds, and per feed the
    resource version to resume from."""

    def __init__(self, queue: Any, args: SourceArgs, clock: Callable[[], float] = time.monotonic) -> None:
        self.queue, self.args, self.clock = queue, args, clock
        self.known: dict[str, NodeView] = {}
        self.holds = Holds()
        self.slices: dict[str, Any] = {}
        self.rules: dict[str, Any] = {}
        self.devices: dict[Any, Any] = {}
        self.nodes = Feed("nodes", NODES_PATH, lambda item: view_of(item, args.view))
        self.client: KubeClient | None = None
        self.outage = False
        self.announced = False

    async def put(self, event: dict[str, Any]) -> None:
        await self.queue.put(event)

    async def run(self) -> None:
        while self.client is None:
            try:
                self.client = await asyncio.to_thread(client_from_params, self.args.connection, retries=0)
            except KubegpuError as exc:
                await self.unreachable(self.nodes, exc)
        await asyncio.gather(self.follow(self.nodes), self.follow_dra())

    async def follow(self, feed: Feed) -> None:
        """List, then watch, resuming from the last version; list again after 410 Gone; back off while the API
        server cannot be reached."""
        while True:
            try:
                if feed.version is None:
                    await self.list_again(feed)
                    await self.reached(feed)
                await self.watch(feed)
            except Expired as exc:
                LOG.info("the watch of the %s expired (%s): listing them again", feed.what, exc)
                feed.version = None
            except (KubegpuError, OSError, urllib3.exceptions.HTTPError) as exc:
                if feed is not self.nodes and getattr(exc, "status", None) in (401, 403):
                    # The DRA objects are an addition: without the right to read them, the nodes are still watched.
                    LOG.warning("the %s are not followed: %s", feed.what, exc)
                    return
                await self.unreachable(feed, exc)

    async def follow_dra(self) -> None:
        """The ResourceSlices and DeviceTaintRules of resource.k8s.io/v1, where the API server serves them."""
        attempt = 0
        while True:
            try:
                assert self.client is not None
                resources = await asyncio.to_thread(served, self.client, RESOURCE_API_VERSION)
                break
            except (KubegpuError, OSError, urllib3.exceptions.HTTPError) as exc:
                if getattr(exc, "status", None) in (401, 403):
                    LOG.warning("no DRA device is followed: %s", exc)
                    return
                await self.idle(retry_wait(attempt, self.args.retry_max))  # the nodes' feed reports it
                attempt += 1
        feeds = [
            Feed(kind, f"/apis/{RESOURCE_API_VERSION}/{kind}", project)
            for kind, project in ((RESOURCE_SLICES, project_slice), (DEVICE_TAINT_RULES, project_taint_rule))
            if kind in resources
        ]
        if not feeds:
            LOG.info("%s serves no ResourceSlices: no DRA device is followed", RESOURCE_API_VERSION)
            return
        await asyncio.gather(*(self.follow(feed) for feed in feeds))

    async def list_again(self, feed: Feed) -> None:
        assert self.client is not None
        found, version = await asyncio.to_thread(list_all, self.client, feed, self.args.page_size)
        first, feed.listed, feed.version = not feed.listed, True, version
        seen = SEEN_IN_LIST if first else SEEN_IN_RELIST
        if feed is not self.nodes:
            (self.slices if feed.what == RESOURCE_SLICES else self.rules).clear()
            (self.slices if feed.what == RESOURCE_SLICES else self.rules).update(found)
            await self.devices_changed(seen, quiet=first and not self.args.initial)
            return
        self.known, changes = relist(self.known, found.values())
        now = self.clock()
        for name in list(self.holds.since) + list(self.known):
            update_hold(self.holds, name, self.known.get(name), now)
        if first and not self.args.initial:
            return
        for change in changes:
            await self.put(self.transition(change, seen))

    async def devices_changed(self, seen: str, quiet: bool = False) -> None:
        after = device_views(self.slices, self.rules)
        changes = device_changes(self.devices, after)
        self.devices = after
        for change in [] if quiet else changes:
            event = device_event(change, seen, self.args.act)
            LOG.info("%s", event["summary"])
            await self.put(event)

    def transition(self, change: Any, seen: str) -> dict[str, Any]:
        event = transition_event(change, self.known, self.args.view, seen, self.args.act)
        LOG.info("%s", event["summary"])
        return event

    async def watch(self, feed: Feed) -> None:
        assert self.client is not None and feed.version is not None
        loop = asyncio.get_running_loop()
        inbox: asyncio.Queue = asyncio.Queue()

        def hand(item: tuple) -> None:
            try:
                loop.call_soon_threadsafe(inbox.put_nowait, item)
            except RuntimeError:  # the loop is closed: the source has ended
                reader.stop.set()

        reader = WatchReader(self.client, feed, self.args.watch_timeout, hand)
        reader.start()
        try:
            while True:
                item = await self.next_item(inbox)
                if item[0] == "END":
                    if item[1] is not None:
                        raise item[1]
                    return
                if item[0] == "OPEN":
                    if feed is self.nodes:
                        await self.announce()
                    await self.reached(feed)
                    continue
                await self.handle(feed, *item)
        finally:
            reader.close()

    async def next_item(self, inbox: asyncio.Queue) -> tuple:
        """The next item of the watch; meanwhile the healthy_for events that fall due."""
        while True:
            deadline = next_due(self.holds, self.args.release_hold)
            timeout = None if deadline is None else max(0.0, deadline - self.clock())
            try:
                return await asyncio.wait_for(inbox.get(), timeout)
            except TimeoutError:
                await self.emit_due()

    async def emit_due(self) -> None:
        now = self.clock()
        for name in due(self.holds, now, self.args.release_hold):
            view = self.known.get(name)
            if view is not None:
                held_for = now - self.holds.since[name]
                event = healthy_for_event(view, self.known, self.args.view, held_for, self.args.act)
                LOG.info("%s", event["summary"])
                await self.put(event)

    async def handle(self, feed: Feed, kind: str, name: str, projected: Any, version: str | None) -> None:
        if version:
            feed.version = version
        if kind == BOOKMARK or not name:
            return
        if feed is not self.nodes:
            objects = self.slices if feed.what == RESOURCE_SLICES else self.rules
            if projected is None:
                objects.pop(name, None)
            else:
                objects[name] = projected
            await self.devices_changed(SEEN_ON_WATCH)
            return
        change = observe(self.known, name, projected)
        update_hold(self.holds, name, self.known.get(name), self.clock())
        if change is not None:
            await self.put(self.transition(change, SEEN_ON_WATCH))
        await self.emit_due()

    async def announce(self) -> None:
        """Once, when the first watch of the nodes is open: how many GPU nodes the source watches."""
        if not self.announced:
            self.announced = True
            message = f"watching {len(self.known)} GPU nodes from resource version {self.nodes.version}"
            LOG.info("%s", message)
            await self.put(source_status_event(WATCHING, message, self.args.act))

    async def reached(self, feed: Feed) -> None:
        feed.attempt = 0
        if self.outage:
            self.outage = False
            host = self.client.host if self.client else ""
            LOG.warning("the API server at %s answers again", host)
            await self.put(source_status_event(REACHABLE, f"the API server at {host} answers again", self.args.act))

    async def unreachable(self, feed: Feed, exc: BaseException) -> None:
        wait = retry_wait(feed.attempt, self.args.retry_max)
        feed.attempt += 1
        host = self.client.host if self.client else "the configured cluster"
        message = str(exc) if isinstance(exc, KubegpuError) else describe_connection_error(exc, host)
        LOG.warning("cannot watch the %s: %s; trying again in %.1f s", feed.what, message, wait)
        if not self.outage:
            self.outage = True
            await self.put(source_status_event(UNREACHABLE, message, self.args.act, wait))
        await self.idle(wait)

    async def idle(self, seconds: float) -> None:
        """Wait, giving the healthy_for events that fall due meanwhile."""
        end = self.clock() + seconds
        while True:
            now = self.clock()
            if now >= end:
                return
            deadline = next_due(self.holds, self.args.release_hold)
            await asyncio.sleep(min(end, deadline if deadline is not None else end) - now)
            await self.emit_due()


async def main(queue: Any, args: dict[str, Any]) -> None:
    """The entry point ansible-rulebook calls."""
    await GpuHealthSource(queue, source_args(args)).run()


if __name__ == "__main__":
    # A harness that prints the events: python gpu_health.py '{"kubeconfig": "~/.kube/config", "release_hold": 30}'

    class _PrintQueue:
        async def put(self, event: dict[str, Any]) -> None:
            print(json.dumps(event, sort_keys=True), flush=True)

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main(_PrintQueue(), json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}))
