"""The source's arguments and its reading of a watch: lines, events, the resource version, 410 Gone,
and the back-off while the API server cannot be reached."""

from __future__ import annotations

import json

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.events.stream import (
    BOOKMARK,
    ERROR,
    MODIFIED,
    expired,
    resource_version,
    retry_wait,
    source_args,
    split_lines,
    watch_event,
    watch_query,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError


def test_lines_are_cut_where_they_end_whatever_the_chunks():
    stream = b'{"type":"ADDED"}\n{"type":"MOD' + b'IFIED"}\n\n{"type":"BOOK'
    lines, pending = [], b""
    for chunk in (stream[:5], stream[5:20], stream[20:]):
        found, pending = split_lines(pending, chunk)
        lines += found
    assert lines == [b'{"type":"ADDED"}', b'{"type":"MODIFIED"}'] and pending == b'{"type":"BOOK'


def test_watch_events_and_their_resource_version():
    line = json.dumps({"type": "MODIFIED", "object": {"metadata": {"name": "n", "resourceVersion": "42"}}}).encode()
    kind, item = watch_event(line)
    assert (kind, resource_version(item)) == (MODIFIED, "42")
    bookmark = json.dumps({"type": "BOOKMARK", "object": {"kind": "Node", "metadata": {"resourceVersion": "77"}}})
    kind, item = watch_event(bookmark.encode())
    assert (kind, resource_version(item)) == (BOOKMARK, "77")
    assert watch_event(b"not json") == (ERROR, {})
    assert watch_event(b'{"type": "ADDED"}') == (ERROR, {})


def test_a_too_old_resource_version_is_gone():
    status = {"kind": "Status", "status": "Failure", "reason": "Expired", "code": 410, "message": "too old"}
    assert expired(ERROR, status)
    assert not expired(ERROR, {"code": 500, "reason": "InternalError"})
    assert not expired(MODIFIED, status)


def test_the_watch_asks_for_bookmarks_from_the_version_known():
    query = watch_query("1234", 300)
    assert query == {"watch": 1, "resourceVersion": "1234", "allowWatchBookmarks": "true", "timeoutSeconds": 300}


def test_back_off_doubles_up_to_the_ceiling_with_jitter():
    assert [retry_wait(n, 60, rand=lambda: 1.0) for n in range(8)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert retry_wait(3, 60, rand=lambda: 0.0) == 4


def test_arguments_defaults_templated_text_and_connection_options():
    args = source_args({})
    assert (args.act, args.initial, args.release_hold, args.view.max_share) == (False, True, 600, 0.5)
    args = source_args(
        {"act": "true", "release_hold": "5", "kubeconfig": "/k", "verify_ssl": False, "eda_feedback_queue": object()}
    )
    assert args.act is True and args.release_hold == 5
    assert args.connection == {"kubeconfig": "/k", "verify_ssl": False}
    with pytest.raises(OptionError, match="unknown argument.*colour"):
        source_args({"colour": "red"})
    with pytest.raises(OptionError, match="act must be true or false"):
        source_args({"act": "maybe"})
    with pytest.raises(OptionError, match="release_hold must be a number"):
        source_args({"release_hold": "soon"})
