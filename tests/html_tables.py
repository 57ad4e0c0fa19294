"""The tables of an HTML page as the fleet report writes them: per table id, its rows as
{data-field: cell text}. Used on the rendered page and on the DOM a browser dumps."""

from __future__ import annotations

from html.parser import HTMLParser


class _Tables(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[dict[str, str]]] = {}
        self._table: str | None = None
        self._field: str | None = None

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag == "table":
            self._table = attributes.get("id") or ""
            self.tables[self._table] = []
        elif tag == "tr" and self._table is not None:
            self.tables[self._table].append({})
        elif tag == "td" and self._table is not None:
            self._field = attributes.get("data-field")
            self.tables[self._table][-1][self._field or ""] = ""

    def handle_endtag(self, tag):
        if tag == "table":
            self.tables[self._table] = [row for row in self.tables[self._table] if row]
            self._table = None
        elif tag == "td":
            self._field = None

    def handle_data(self, data):
        if self._table is not None and self._field is not None:
            self.tables[self._table][-1][self._field] += data


def html_tables(page: str) -> dict[str, list[dict[str, str]]]:
    parser = _Tables()
    parser.feed(page)
    return parser.tables


COUNTS = ("capacity", "allocatable", "allocated", "free", "unhealthy")
LOCATION = ("address", "zone", "instance_type", "provider_id")


def assert_tables_hold_the_report(tables: dict[str, list[dict[str, str]]], report: dict) -> None:
    """The page's cluster, model, per-node and placement tables hold the numbers (and node locations) of the
    JSON report."""
    assert [row["cluster"] for row in tables["clusters"]] == [c["name"] for c in report["clusters"]]
    for row, entry in zip(tables["clusters"], report["clusters"], strict=True):
        assert {key: int(row[key]) for key in COUNTS} == {key: entry["totals"][key] for key in COUNTS}, entry["name"]
    assert [(row["model"], *(int(row[key]) for key in COUNTS)) for row in tables.get("models", [])] == [
        (m["model"], *(m[key] for key in COUNTS)) for m in report["models"]
    ]
    for index, entry in enumerate(report["clusters"]):
        rows = tables.get(f"nodes-{index}", [])
        assert [row["node"] for row in rows] == [n["name"] for n in entry["nodes"]], entry["name"]
        assert [{key: int(row[key]) for key in COUNTS} for row in rows] == [
            {key: n[key] for key in COUNTS} for n in entry["nodes"]
        ], entry["name"]
        assert [[row[key] for key in LOCATION] for row in rows] == [
            [n[key] or "-" for key in LOCATION] for n in entry["nodes"]
        ], entry["name"]
    assert_placement_tables_hold_the_report(tables, report)


def assert_placement_tables_hold_the_report(tables: dict[str, list[dict[str, str]]], report: dict) -> None:
    """Each cluster's placement tables hold its JSON placement view: per pool (and `all`) the free GPUs,
    the largest and the pods of each size that fit; per pool and size with anything to say, the pods, the
    nodes they fit on (the first of them) and the GPUs stranded; the pending GPU pods with their reason."""
    for index, entry in enumerate(report["clusters"]):
        placement = entry.get("placement")
        if not placement or not placement["pools"]:
            assert f"placement-{index}" not in tables, entry["name"]
            continue
        sizes = [str(size) for size in placement["sizes"]]
        pools = [*placement["pools"], placement["fleet"]]
        assert [
            [row["pool"], int(row["free"]), int(row["largest"]), *(int(row[f"pods of {s}"]) for s in sizes)]
            for row in tables[f"placement-{index}"]
        ] == [[p["pool"], p["gpus_free"], p["largest"], *(p["fits"][s]["pods"] for s in sizes)] for p in pools]
        expected = [
            (p["pool"], s, p["fits"][s]["pods"], p["stranded"][s]["gpus"], p["fits"][s]["nodes"])
            for p in placement["pools"]
            for s in sizes
            if p["fits"][s]["pods"] or p["stranded"][s]["gpus"]
        ]
        rows = tables[f"placement-fits-{index}"]
        assert [(r["pool"], r["gpus"], int(r["pods"]), int(r["stranded"])) for r in rows] == [e[:4] for e in expected]
        for row, expect in zip(rows, expected, strict=True):
            nodes = expect[-1]
            named = [part.rsplit(" (", 1)[0] for part in row["where"].split(" and ")[0].split(", ")] if nodes else []
            assert set(named) <= set(nodes) and len(named) == min(len(nodes), 5), (row, nodes)
        assert [(r["pod"], int(r["gpus"]), r["reason"]) for r in tables.get(f"pending-{index}", [])] == [
            (p["pod"], p["gpus"], p["reason"] or "-") for p in placement["pending"]
        ], entry["name"]
