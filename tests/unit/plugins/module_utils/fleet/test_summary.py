from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.summary import preflight_diagnosis, summary_lines

FACTS = {
    "nodes": [{"name": "a"}, {"name": "b"}],
    "models": {
        "Tesla-T4": {"nodes": 1, "capacity": 4, "allocatable": 3, "allocated": 1, "free": 2},
        "NVIDIA-H100-80GB-HBM3": {"nodes": 1, "capacity": 8, "allocatable": 8, "allocated": 0, "free": 8},
    },
    "totals": {"nodes": 2, "capacity": 12, "allocatable": 11, "allocated": 1, "free": 10},
    "nodes_without_capacity": [],
    "problems": [{"node": "a", "problem": "allocatable below capacity", "reason": "capacity 4, allocatable 3"}],
}


def test_summary_is_a_table_per_model_then_problems():
    lines = summary_lines(FACTS)
    assert lines[0] == "GPU fleet"
    assert lines[1].split() == ["model", "nodes", "gpus", "allocatable", "allocated", "free"]
    assert set(lines[2]) == {"-", " "}
    assert lines[3].split() == ["NVIDIA-H100-80GB-HBM3", "1", "8", "8", "0", "8"]
    assert lines[4].split() == ["Tesla-T4", "1", "4", "3", "1", "2"]
    assert lines[5].split() == ["total", "2", "12", "11", "1", "10"]
    assert lines[6] == "problems: 1"
    assert lines[7] == "  a: allocatable below capacity (capacity 4, allocatable 3)"
    assert len({len(line) for line in lines[1:6]}) == 1


def test_diagnosis_explains_missing_capacity():
    assert preflight_diagnosis(FACTS) == ""
    no_capacity = {"nodes": [{"name": "gpu-1"}], "totals": {"capacity": 0}, "nodes_without_capacity": ["gpu-1"]}
    text = preflight_diagnosis(no_capacity)
    assert "GPU nodes without it: gpu-1" in text
    assert "device-plugin pod" in text and "driver" in text
    assert "no node looks like a GPU node" in preflight_diagnosis({"nodes": [], "totals": {}})
    assert summary_lines({})[-1] == "problems: none"


def test_summary_counts_the_nodes_by_health_and_names_each_health_problem():
    problem = {
        "severity": "degraded",
        "problem": "GPUs withdrawn by the device plugin",
        "reason": "capacity 4, allocatable 3",
    }
    facts = {
        **FACTS,
        "nodes": [{"name": "a", "health": {"status": "degraded", "problems": [problem]}}, {"name": "b"}],
        "health": {"healthy": 1, "degraded": 1, "failed": 0},
        "notes": ["a note"],
    }
    lines = summary_lines(facts)
    assert lines[-3:] == [
        "health: 1 healthy, 1 degraded, 0 failed",
        "  a: degraded: GPUs withdrawn by the device plugin (capacity 4, allocatable 3)",
        "note: a note",
    ]
    assert not any(line.startswith("health:") for line in summary_lines(FACTS))


def test_summary_counts_the_unknown_nodes_when_there_are_some():
    facts = {**FACTS, "health": {"healthy": 1, "unknown": 1, "degraded": 0, "failed": 0}}
    assert "health: 1 healthy, 1 unknown, 0 degraded, 0 failed" in summary_lines(facts)
    quiet = {**FACTS, "health": {"healthy": 2, "unknown": 0, "degraded": 0, "failed": 0}}
    assert "health: 2 healthy, 0 degraded, 0 failed" in summary_lines(quiet)
