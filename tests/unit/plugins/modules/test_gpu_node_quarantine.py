"""gpu_node_quarantine's options: bad input is refused naming the option, before anything is read
(the ranges by the write-module skeleton's check_ranges, the rest by build_options)."""

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.node_quarantine.run import build_options
from ansible_collections.kubegpu.scheduling.plugins.module_utils.options.groups import check_ranges
from ansible_collections.kubegpu.scheduling.plugins.modules import gpu_node_quarantine

DEFAULTS = {
    "reason": "XID 79",
    "quarantined_by": "oncall",
    "eviction_timeout": 300,
    "max_share": 0.5,
    "pool_by": ["model"],
    "model_label_keys": ["nvidia.com/gpu.product"],
    "parallelism": 16,
}


def test_good_options_are_read_with_the_time_of_the_record():
    options = build_options(dict(DEFAULTS, pool_by=["model", "pool", "model"]))
    assert options.pool_by == ("model", "pool") and options.max_share == 0.5
    assert options.now.endswith("Z") and options.quarantined_by == "oncall"


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"max_share": 0}, "max_share must be a number above 0 and at most 1"),
        ({"max_share": 1.5}, "max_share must be a number above 0 and at most 1"),
        ({"parallelism": 0}, "parallelism must be between 1 and 256"),
        ({"eviction_timeout": -1}, "eviction_timeout must be at least 0, not -1"),
        ({"pool_by": [" "]}, "pool_by must name at least one dimension"),
        ({"reason": " "}, "reason must be a non-empty string"),
        ({"quarantined_by": ""}, "quarantined_by must be a non-empty string"),
    ],
)
def test_bad_options_are_refused_naming_the_option(change, named):
    params = dict(DEFAULTS, **change)
    with pytest.raises(OptionError, match=named):
        check_ranges(params)
        build_options(params)


def test_the_documented_defaults_are_the_argument_spec_defaults():
    import yaml

    documented = yaml.safe_load(gpu_node_quarantine.DOCUMENTATION)["options"]
    assert "names" in documented and documented["names"]["aliases"] == ["nodes"]
    for name, spec in gpu_node_quarantine.argument_spec().items():
        if name in documented and "default" in spec:
            assert documented[name].get("default") == spec["default"], name
