"""The quarantine record: written and read back, and a record that does not parse proves nothing."""

from __future__ import annotations

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.ownership import (
    QUARANTINE_TAINT,
    Record,
    is_quarantine_taint,
    read_record,
    record_annotation,
)


def test_a_record_round_trips():
    record = Record("oncall", "XID 79", "2026-01-02T03:04:05Z", cordoned=False, tainted=True)
    assert read_record(record_annotation(record)) == record


def test_the_record_text_is_what_go_encodes_alike_whatever_the_reason():
    """ASCII only, no <, > or &: the text the API server returns is then the text that was written."""
    record = Record("oncall", "temp > 90 \u00b0C & <ECC>, caf\u00e9", "2026-01-02T03:04:05Z", cordoned=True)
    text = record_annotation(record)
    assert text.isascii() and not set("<>&") & set(text), text
    assert "\\u003e 90 \\u00b0C \\u0026 \\u003cECC\\u003e" in text
    assert read_record(text) == record


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "not json",
        "[]",
        '{"by": 1, "reason": "x", "at": "t"}',
        '{"by":"a","reason":"b","at":"c","cordoned":"yes"}',
        '{"by":"a","reason":"b","at":"c"}',
    ],
)
def test_a_missing_or_malformed_record_is_none(text):
    assert read_record(text) is None


def test_only_our_key_with_our_effect_is_our_taint():
    assert is_quarantine_taint(QUARANTINE_TAINT)
    assert not is_quarantine_taint({"key": QUARANTINE_TAINT["key"], "effect": "NoExecute"})
    assert not is_quarantine_taint({"key": "nvidia.com/gpu", "effect": "NoSchedule"})
