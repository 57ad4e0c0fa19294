"""Each fleet filter has its own documentation, beside the plugin and named after the filter."""

import inspect
from pathlib import Path

import pytest
import yaml

from ansible_collections.kubegpu.scheduling.plugins.filter.fleet import FilterModule

FILTERS = FilterModule().filters()
FILTER_DIR = Path(__file__).resolve().parents[4] / "plugins" / "filter"


def doc_of(name):
    return yaml.safe_load((FILTER_DIR / f"{name}.yml").read_text())


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_each_filter_documents_itself_under_its_own_name(name):
    doc = doc_of(name)
    assert set(doc) == {"DOCUMENTATION", "EXAMPLES", "RETURN"}
    assert doc["DOCUMENTATION"]["name"] == name
    assert f"kubegpu.scheduling.{name}" in doc["EXAMPLES"]
    assert "_value" in doc["RETURN"]


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_the_documented_options_are_the_arguments(name):
    options = doc_of(name)["DOCUMENTATION"]["options"]
    parameters = inspect.signature(FILTERS[name]).parameters
    assert list(options) == ["_input", *list(parameters)[1:]]
    for option, parameter in zip(list(options)[1:], list(parameters.values())[1:], strict=True):
        assert options[option].get("default") == parameter.default, option


def test_no_filter_file_carries_the_documentation_of_one_filter():
    assert "DOCUMENTATION" not in (FILTER_DIR / "fleet.py").read_text()
    assert sorted(p.stem for p in FILTER_DIR.glob("*.yml")) == sorted(FILTERS)
