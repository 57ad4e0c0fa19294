"""bench/report.py: what a full run keeps of the report it replaces, without running a benchmark."""

from __future__ import annotations

from bench import report

HAND = "\n".join(
    [
        f"{report.HAND_WRITTEN_START}: fleet report -->",
        "## Fleet report over 40 clusters",
        "",
        "Measured by hand.",
        report.HAND_WRITTEN_END,
    ]
)
DRA = f"{report.DRA_SECTION_START}\n## DRA\n\nold numbers\n{report.DRA_SECTION_END}"
SCALE = f"{report.SCALE_SECTION_START}\n## Scale\n\nold numbers\n{report.SCALE_SECTION_END}"
QUOTED = f"Sections between `{report.HAND_WRITTEN_START}: … -->` and `{report.HAND_WRITTEN_END}` are kept."
OLD = f"# Benchmarks\n\n{QUOTED}\n\n## Targets\n\ngenerated\n\n{SCALE}\n\n{DRA}\n\n{HAND}\n\n## Analysis of this run\n"


def test_a_full_run_keeps_the_hand_written_sections_whole():
    assert report.carried_over(OLD, dra_written=True, scale_written=True) == [HAND]


def test_a_full_run_without_dra_or_scale_results_keeps_those_sections():
    assert report.carried_over(OLD, dra_written=False, scale_written=False) == [DRA, SCALE, HAND]
    assert report.carried_over(OLD, dra_written=True, scale_written=False) == [SCALE, HAND]


def test_every_marked_block_is_found_and_an_unclosed_one_is_not_taken():
    second = HAND.replace("fleet report", "module start-up")
    text = f"{HAND}\nbetween\n{second}\n{report.HAND_WRITTEN_START}: unclosed -->\ntext"
    assert report.marked_blocks(text, report.HAND_WRITTEN_START, report.HAND_WRITTEN_END) == [HAND, second]
    assert report.marked_blocks("# nothing marked", report.HAND_WRITTEN_START, report.HAND_WRITTEN_END) == []
