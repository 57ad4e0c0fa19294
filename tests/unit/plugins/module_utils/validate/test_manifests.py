from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.manifests import (
    LineLocator,
    ManifestError,
    alias_positions,
    decode_text,
    expand_sources,
    load_manifests,
    parse_text,
    path_tokens,
)

POD = """apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  containers:
    - name: main
      image: busybox
      env:
        - name: NVIDIA_VISIBLE_DEVICES
          value: all
"""
BILLION_LAUGHS = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join(["*" + chr(97 + i)] * 9) + "]\n" for i in range(9)
)


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def load(*paths, **kwargs):
    manifests = load_manifests([str(p) for p in paths], **kwargs)
    documents = list(manifests)
    return manifests, documents


# ---------------------------------------------------------------------------------------------
# Which files


def test_directories_are_searched_for_manifests_skipping_hidden_ones(tmp_path):
    write(tmp_path / "b.yaml", "")
    write(tmp_path / "a" / "x.yml", "")
    write(tmp_path / "a" / "y.JSON", "{}")
    write(tmp_path / "a" / "notes.md", "")
    write(tmp_path / ".git" / "config.yaml", "")
    write(tmp_path / "a" / ".hidden.yaml", "")
    files, errors = expand_sources([str(tmp_path)])
    assert errors == []
    assert sorted(os.path.relpath(f, tmp_path) for f in files) == ["a/x.yml", "a/y.JSON", "b.yaml"]


def test_globs_files_and_missing_paths(tmp_path):
    first = write(tmp_path / "one.yaml", "")
    write(tmp_path / "sub" / "two.yaml", "")
    explicit = write(tmp_path / "rendered.txt", "")
    files, errors = expand_sources(
        [
            str(tmp_path / "**" / "*.yaml"),
            str(first),
            str(explicit),
            str(tmp_path / "nope.yaml"),
            str(tmp_path / "*.none"),
            "",
        ]
    )
    assert [os.path.relpath(f, tmp_path) for f in files] == ["one.yaml", "sub/two.yaml", "rendered.txt"]
    assert [(os.path.basename(e.source), e.message) for e in errors] == [
        ("nope.yaml", "no such file or directory"),
        ("*.none", "the pattern matches no files"),
        ("", "not a path"),
    ]


# ---------------------------------------------------------------------------------------------
# Reading and parsing


def test_multi_document_yaml_keeps_indices_and_lines(tmp_path):
    path = write(
        tmp_path / "m.yaml",
        "---\n# Source: chart/templates/a.yaml\n" + POD.format(name="a") + "---\n---\n" + POD.format(name="b"),
    )
    manifests, documents = load(path)
    assert [(d.index, d.data and d.data["metadata"]["name"], d.line) for d in documents] == [
        (0, "a", 3),
        (1, None, 15),
        (2, "b", 16),
    ]
    assert manifests.files == [str(path)]
    assert manifests.errors == []
    assert manifests.spans[(str(path), 2)][0] == 16


def test_a_broken_file_is_one_error_and_the_other_files_are_still_loaded(tmp_path):
    good = write(tmp_path / "a-good.yaml", POD.format(name="good"))
    broken = write(tmp_path / "b-broken.yaml", POD.format(name="first") + "---\nkind: [unclosed\n")
    later = write(tmp_path / "c-later.json", json.dumps({"kind": "Pod", "metadata": {"name": "later"}}))
    manifests, documents = load(good, broken, later)
    assert [d.data["metadata"]["name"] for d in documents] == ["good", "first", "later"]
    [error] = manifests.errors
    assert error.source == str(broken)
    assert error.document == 1
    assert error.line == 14
    assert error.message.startswith("YAML error in document 1 at line 14")


def test_json_errors_name_line_and_column(tmp_path):
    manifests, documents = load(write(tmp_path / "bad.json", '{\n  "kind": "Pod",\n  "oops"\n}'))
    assert documents == []
    assert manifests.errors[0].message == "JSON error at line 4, column 1: Expecting ':' delimiter"


@pytest.mark.parametrize(
    "data, text",
    [
        ("kind: Pod é\n".encode(), "kind: Pod é\n"),
        (b"\xef\xbb\xbfkind: Pod\n", "kind: Pod\n"),
        ("kind: Pod é\n".encode("utf-16"), "kind: Pod é\n"),
        ("kind: Pod\n".encode("utf-32"), "kind: Pod\n"),
    ],
)
def test_utf8_and_byte_order_marked_utf16_32_decode(data, text):
    assert decode_text(data) == text


def test_non_utf8_is_a_clear_error_with_its_line(tmp_path):
    latin1 = write(tmp_path / "latin1.yaml", "kind: Pod\nmetadata:\n  name: caf\xe9\n".encode("latin-1"))
    good = write(tmp_path / "zz.yaml", POD.format(name="still-checked"))
    manifests, documents = load(latin1, good)
    assert [d.data["metadata"]["name"] for d in documents] == ["still-checked"]
    [error] = manifests.errors
    assert error.message == "not valid UTF-8: byte 0xe9 at offset 31 (line 3); save the file as UTF-8"
    assert error.line == 3
    with pytest.raises(ManifestError, match="not valid UTF-16"):
        decode_text(b"\xff\xfe\x00\xd8")


def test_huge_files_are_refused_without_being_read(tmp_path):
    huge = tmp_path / "huge.yaml"
    with open(huge, "wb") as handle:
        handle.truncate(64 * 1024**3)  # sparse: 64 GiB of nothing, on any file system that allows it
    small = write(tmp_path / "small.yaml", POD.format(name="small"))
    started = time.monotonic()
    manifests, documents = load(huge, small, max_file_size=1024**2)
    assert time.monotonic() - started < 10
    assert [d.data["metadata"]["name"] for d in documents] == ["small"]
    assert manifests.errors[0].message == (
        f"the file has {64 * 1024**3} bytes, more than the limit of {1024**2} (max_file_size)"
    )


def test_special_files_are_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    manifests, documents = load(fifo, write(tmp_path / "ok.yaml", "kind: Pod\n"))
    assert [d.data for d in documents] == [{"kind": "Pod"}]
    assert [(e.source, e.message) for e in manifests.errors] == [(str(fifo), "not a regular file")]


@pytest.mark.parametrize(
    "text, message",
    [
        (BILLION_LAUGHS, "YAML aliases would expand the document to more than"),
        (
            "base: &b [" + ",".join(["1"] * 20_000) + "]\nrefs: [" + ",".join(["*b"] * 2_000) + "]\n",
            "YAML aliases would expand the document",
        ),
        ("a: &x [*x]\n", "a YAML alias refers to a node that contains it"),
        ("a: &x {b: [1, *x]}\n", "a YAML alias refers to a node that contains it"),
        ("[" * 5_000 + "]" * 5_000, "exceeded maximum nesting depth"),
        ("a:\n" + "".join("  " * i + "b:\n" for i in range(1, 1_500)), "exceeded maximum nesting depth"),
        ("when: 2024-13-45\n", "month must be in 1..12"),
        ("a: !!int abc\n", "YAML error in document 0: invalid literal for int()"),
        ("a: !custom x\n", "could not determine a constructor for the tag '!custom'"),
        (
            "a: 1\n\x00",
            "YAML error in document 0: unacceptable character #x0000 (control characters are not allowed) at line 2",
        ),
    ],
)
def test_hostile_yaml_ends_quickly_in_one_clear_error_and_other_files_load(tmp_path, text, message):
    hostile = write(tmp_path / "a-hostile.yaml", text)
    after = write(tmp_path / "b-after.yaml", POD.format(name="after"))
    started = time.monotonic()
    manifests, documents = load(hostile, after)
    assert time.monotonic() - started < 10
    assert [d.data["metadata"]["name"] for d in documents if d.source == str(after)] == ["after"]
    [error] = manifests.errors
    assert error.source == str(hostile)
    assert message in error.message


def test_deep_json_is_a_clear_error(tmp_path):
    manifests, _documents = load(write(tmp_path / "deep.json", "[" * 100_000 + "]" * 100_000))
    assert manifests.errors[0].message == "the JSON document is nested too deeply to load"


def test_ordinary_aliases_and_stars_in_strings_load():
    text = (
        "defaults: &defaults {image: busybox, env: [{name: A, value: b}]}\n"
        "one: *defaults\n"
        "merged:\n  <<: *defaults\n  image: nginx\n"
        'schedule: "*/5 * * * *"\n'
        "verbs: ['*']\n"
    )
    assert alias_positions(text) != []
    documents, error = parse_text(text, "aliases.yaml")
    assert error is None
    data = documents[0].data
    assert data["one"] == data["defaults"]
    assert data["merged"]["image"] == "nginx" and data["merged"]["env"] == [{"name": "A", "value": "b"}]
    assert data["schedule"] == "*/5 * * * *"


def test_definitions_as_objects_lists_and_strings():
    pod = {"kind": "Pod", "metadata": {"name": "p"}}
    assert [d.data for d in load_manifests(definition=pod)] == [pod]
    assert [(d.source, d.index) for d in load_manifests(definition=[pod, pod])] == [
        ("definition", 0),
        ("definition", 1),
    ]
    manifests = load_manifests(definition=POD.format(name="a") + "---\n" + POD.format(name="b"))
    assert [d.data["metadata"]["name"] for d in manifests] == ["a", "b"]
    assert "definition" in manifests.texts
    bad = load_manifests(definition=42)
    assert list(bad) == []
    assert bad.errors[0].message == "definition must be an object, a list of objects or a YAML string, not int"
    broken = load_manifests(definition="kind: [")
    assert list(broken) == [] and broken.errors[0].source == "definition"


# ---------------------------------------------------------------------------------------------
# Lines


def test_path_tokens():
    assert path_tokens("items[2].spec.containers[0].resources.limits['nvidia.com/gpu']") == [
        "items",
        2,
        "spec",
        "containers",
        0,
        "resources",
        "limits",
        "nvidia.com/gpu",
    ]
    assert path_tokens("metadata.annotations['a.b/c']") == ["metadata", "annotations", "a.b/c"]


def test_line_locator_finds_the_offending_field_in_files_and_inline_yaml(tmp_path):
    path = write(tmp_path / "m.yaml", POD.format(name="a") + "---\n" + POD.format(name="b"))
    manifests, _documents = load(path)
    locator = LineLocator(manifests)
    assert locator.line_of(str(path), 1, "spec.containers[0].env[0].value") == 23
    assert locator.line_of(str(path), 0, "spec.containers[0].env[0].value") == 11
    assert locator.line_of(str(path), 0, "spec.containers[0].env[5].value") == 10  # the deepest node that exists
    assert locator.line_of(str(path), 9, "spec") is None
    assert locator.line_of(None, None, "spec") is None
    inline = load_manifests(definition="---\n" + POD.format(name="x"))
    list(inline)
    assert LineLocator(inline).line_of("definition", 0, "metadata.name") == 5


def test_line_locator_reads_json_too(tmp_path):
    body = {"kind": "Pod", "spec": {"containers": [{"name": "a", "env": [{"name": "X", "value": "all"}]}]}}
    path = write(tmp_path / "p.json", json.dumps(body, indent=2))
    manifests, _documents = load(path)
    line = LineLocator(manifests).line_of(str(path), 0, "spec.containers[0].env[0].value")
    assert path.read_text().splitlines()[line - 1].strip() == '"value": "all"'


# ---------------------------------------------------------------------------------------------
# Random and malformed input never raises

YAMLISH = st.lists(
    st.sampled_from(
        [
            "a",
            ":",
            " ",
            "\n",
            "-",
            "[",
            "]",
            "{",
            "}",
            ",",
            "&x",
            "*x",
            "!!str",
            "'",
            '"',
            "#",
            "---",
            "\t",
            "?",
            "|",
            ">",
            "%YAML 1.1",
            "\\",
            "é",
            "\x00",
            "  ",
        ]
    ),
    max_size=60,
).map("".join)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(YAMLISH, st.text(max_size=200)))
def test_random_text_parses_or_gives_an_error(text):
    documents, error = parse_text(text, "random.yaml")
    assert error is None or (error.source == "random.yaml" and error.message)
    assert [d.index for d in documents] == list(range(len(documents)))


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(st.binary(max_size=300), st.booleans())
def test_random_bytes_in_a_file_never_raise(tmp_path, data, as_json):
    path = write(tmp_path / ("random.json" if as_json else "random.yaml"), data)
    manifests, documents = load(path)
    assert len(manifests.errors) <= 1
    assert all(d.source == str(path) for d in documents)


def alias_tree(levels: int, fanout: int) -> str:
    lines = ['l0: &l0 ["' + "x" * 8 + '"]']
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * fanout) + "]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=1, max_value=40), st.integers(min_value=1, max_value=12))
def test_any_alias_tree_loads_or_is_refused_quickly(levels, fanout):
    started = time.monotonic()
    documents, error = parse_text(alias_tree(levels, fanout), "aliases.yaml")
    assert time.monotonic() - started < 5
    expanded_leaves = fanout**levels
    if expanded_leaves <= 10_000:
        assert error is None
        node = documents[0].data[f"l{levels}"]
        for _level in range(levels):
            assert len(node) == fanout
            node = node[0]
    elif expanded_leaves > 10_000_000:
        assert documents == [] and "YAML aliases would expand the document" in error.message


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=1, max_value=20_000), st.sampled_from(["flow", "block", "json"]))
def test_any_nesting_depth_loads_or_is_refused_quickly(depth, style):
    if style == "flow":
        text = "[" * depth + "]" * depth
    elif style == "block":
        text = "".join("  " * i + "a:\n" for i in range(min(depth, 2_000))) + "  " * min(depth, 2_000) + "b\n"
    else:
        text = "[" * depth + "]" * depth
    started = time.monotonic()
    documents, error = parse_text(text, "deep", as_json=style == "json")
    assert time.monotonic() - started < 5
    assert (error is None) == bool(documents)
    if error is not None:
        assert "nested too deeply" in error.message or "exceeded maximum nesting depth" in error.message


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=80),
    st.binary(min_size=1, max_size=4).filter(lambda b: not _is_utf8(b)),
    st.integers(min_value=0, max_value=5),
)
def test_invalid_utf8_anywhere_names_its_offset_and_line(prefix, invalid, newlines):
    head = (prefix + "\n" * newlines).encode()
    data = head + invalid + b"\nkind: Pod\n"
    with pytest.raises(ManifestError) as raised:
        decode_text(data)
    offset = int(re.search(r"at offset (\d+) ", raised.value.message)[1])
    assert len(head) <= offset < len(head) + len(invalid)
    assert raised.value.line == data.count(b"\n", 0, offset) + 1
    assert raised.value.message.startswith(f"not valid UTF-8: byte 0x{data[offset]:02x} at offset {offset}")


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
