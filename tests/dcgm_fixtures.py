"""Published DCGM exporter outputs (tests/unit/fixtures/dcgm/, each with its source in its first
comment lines) for tests that read the exporter's metrics.

``load(name)`` is the exposition text without those source lines; ``series(name)`` its samples as
``(metric, labels, value)`` in the order published, metric names as published (the parser's
``_total`` added to counter samples is taken off again)."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

FIXTURES = Path(__file__).parent / "unit" / "fixtures" / "dcgm"
# The comment lines each fixture begins with, saying where its text was published.
SOURCE_PREFIXES = ("# source:", "# commit/date:", "# shows:", "# cut:")


def names() -> list[str]:
    """The fixtures' names (file names without ``.prom``), sorted."""
    return sorted(path.stem for path in FIXTURES.glob("*.prom"))


def raw(name: str) -> str:
    """A fixture's whole file, source lines included."""
    return (FIXTURES / f"{name}.prom").read_text(encoding="utf-8")


def source_lines(name: str) -> list[str]:
    """The source comment lines a fixture begins with."""
    lines = []
    for line in raw(name).splitlines():
        if not line.startswith(SOURCE_PREFIXES):
            break
        lines.append(line)
    return lines


def load(name: str) -> str:
    """The exposition text of a fixture as published, without its source comment lines."""
    lines = raw(name).splitlines(keepends=True)
    return "".join(lines[len(source_lines(name)) :])


def _published_names(text: str) -> set[str]:
    return {
        line.strip().split("{", 1)[0].split()[0]
        for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    }


def series(name: str) -> list[tuple[str, dict[str, str], float]]:
    """Every sample of a fixture as (metric name, labels, value), in the order published."""
    text = load(name)
    published = _published_names(text)
    samples = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            metric = sample.name
            if metric not in published and family.type == "counter" and metric == f"{family.name}_total":
                metric = family.name
            samples.append((metric, dict(sample.labels), float(sample.value)))
    return samples
