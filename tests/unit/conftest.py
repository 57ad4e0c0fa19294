"""The census of finding kinds: every hit a check turns into a finding through the registry while the
unit tests run is recorded, so that the census test, moved to run last, names each kind that no unit
test produces. Hits that test_finding_contract.py makes up to hold the shape of every kind do not count."""

from __future__ import annotations

import os

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import Finding, Hit, KindRegistry

CENSUS = "test_every_finding_kind_is_produced_by_a_unit_test"
MADE_UP = "tests/unit/test_finding_contract.py::"
PRODUCED: set[str] = set()
_finding = KindRegistry.finding


def _recorded(registry: KindRegistry, hit: Hit) -> Finding:
    finding = _finding(registry, hit)
    if not os.environ.get("PYTEST_CURRENT_TEST", "").startswith(MADE_UP):
        PRODUCED.add(finding.kind.id)
    return finding


KindRegistry.finding = _recorded  # type: ignore[method-assign]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    census = [item for item in items if item.name == CENSUS]
    items[:] = [item for item in items if item.name != CENSUS] + census


@pytest.fixture
def produced_kinds() -> set[str]:
    """The kinds (as declared) that the unit tests run so far produced."""
    return PRODUCED
