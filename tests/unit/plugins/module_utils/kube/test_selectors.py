"""A metav1.LabelSelector written as a selector string, as the API server's list calls take it."""

from __future__ import annotations

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.selectors import selector_text


@pytest.mark.parametrize(
    "selector, text",
    [
        ({"matchLabels": {"b": "2", "a": "1"}}, "a=1,b=2"),
        (
            {
                "matchExpressions": [
                    {"key": "k", "operator": "In", "values": ["x", "y"]},
                    {"key": "e", "operator": "Exists"},
                ]
            },
            "k in (x,y),e",
        ),
        ({}, None),
        ({"matchExpressions": [{"key": "k", "operator": "Weird"}]}, None),
        ("junk", None),
    ],
)
def test_selector_text(selector, text):
    assert selector_text(selector) == text
