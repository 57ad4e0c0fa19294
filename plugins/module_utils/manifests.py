# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Load Kubernetes manifests from files, directories, globs, inline objects or YAML strings.

Parsing uses PyYAML's C loader when it is available. A file that cannot be read or parsed
gives one clear error and the other files are still loaded: files over a size cap, files that
are not regular files, text that is not UTF-8, nesting too deep for the parser, and YAML
aliases that would expand beyond a bound (an "alias bomb"). Aliases are looked for with a
fast text scan first, so ordinary files pay nothing for that guard.
"""

from __future__ import annotations

import codecs
import glob
import json
import os
import re
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

try:
    import yaml

    HAS_YAML = True
    _LOADER: Any = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader
    HAS_C_LOADER = hasattr(yaml, "CSafeLoader")
except ImportError:  # pragma: no cover - PyYAML is a requirement of the collection
    HAS_YAML = False
    HAS_C_LOADER = False
    _LOADER = None

DEFAULT_MAX_FILE_SIZE = 32 * 1024 * 1024
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
# A document whose aliases expand to more nodes than this (or ten times its own size) is refused.
MAX_ALIAS_EXPANSION = 1_000_000
# An alias token: `*name` after a space, a flow indicator or a line start. Anything that could be
# an alias matches; a false match only costs a walk over the composed nodes of that file.
_ALIAS_TOKEN = re.compile(r"(?:^|[\s\[\]{},:?-])\*[^\s,\[\]{}]", re.MULTILINE)
_GLOB_CHARS = re.compile(r"[*?\[]")
_PATH_TOKEN = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]|\['([^']*)'\]")
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
         (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


@dataclass(frozen=True)
class Document:
    source: str
    index: int
    data: Any
    line: int | None = None  # first line of the document (1-based), where known
    end_line: int | None = None


@dataclass(frozen=True)
class LoadError:
    source: str
    message: str
    document: int | None = None
    line: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "document": self.document, "line": self.line, "message": self.message}


@dataclass
class Manifests:
    documents: list[Document] = field(default_factory=list)
    errors: list[LoadError] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    texts: dict[str, str] = field(default_factory=dict)  # inline YAML definitions, for locating lines


class ManifestError(Exception):
    """One file or definition could not be loaded; the message says what and where."""

    def __init__(self, message: str, document: int | None = None, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.document = document
        self.line = line


# ---------------------------------------------------------------------------------------------
# Which files


def expand_sources(patterns: Iterable[str]) -> tuple[list[str], list[LoadError]]:
    """Files named by paths, directories (searched for .yaml, .yml and .json) and globs, in order, once each."""
    files: list[str] = []
    errors: list[LoadError] = []
    seen: set[str] = set()

    def add(path: str) -> None:
        key = os.path.normpath(path)
        if key not in seen:
            seen.add(key)
            files.append(path)

    for pattern in patterns:
        if not isinstance(pattern, str) or not pattern:
            errors.append(LoadError(str(pattern), "not a path"))
            continue
        pattern = os.path.expanduser(pattern)
        if os.path.isdir(pattern):
            for path in directory_manifests(pattern):
                add(path)
        elif os.path.lexists(pattern):
            add(pattern)
        elif _GLOB_CHARS.search(pattern):
            matches = sorted(glob.glob(pattern, recursive=True))
            if not matches:
                errors.append(LoadError(pattern, "the pattern matches no files"))
            for match in matches:
                for path in (directory_manifests(match) if os.path.isdir(match) else [match]):
                    add(path)
        else:
            errors.append(LoadError(pattern, "no such file or directory"))
    return files, errors


def directory_manifests(root: str) -> list[str]:
    """Manifest files under a directory, sorted, skipping hidden files and directories."""
    found = []
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
        for name in sorted(names):
            if not name.startswith(".") and name.lower().endswith(MANIFEST_SUFFIXES):
                found.append(os.path.join(directory, name))
    return found


# ---------------------------------------------------------------------------------------------
# Reading and decoding


def read_text(path: str, max_size: int = DEFAULT_MAX_FILE_SIZE) -> str:
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise ManifestError("not a regular file")
        if info.st_size > max_size:
            raise ManifestError(f"the file has {info.st_size} bytes, more than the limit of {max_size} "
                                "(max_file_size)")
        with open(path, "rb") as handle:
            data = handle.read(max_size + 1)
    except OSError as exc:
        raise ManifestError(f"cannot read the file: {exc.strerror or exc}") from exc
    if len(data) > max_size:
        raise ManifestError(f"the file has more than {max_size} bytes, the limit (max_file_size)")
    return decode_text(data)


def decode_text(data: bytes) -> str:
    """UTF-8, or UTF-16/32 with a byte order mark, as YAML allows."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(encoding).lstrip("\ufeff")
            except UnicodeDecodeError as exc:
                raise ManifestError(f"not valid {encoding.upper()} after its byte order mark: {exc.reason} at "
                                    f"byte {exc.start}") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ManifestError(f"not valid UTF-8: byte 0x{data[exc.start]:02x} at offset {exc.start} (line {line}); "
                            "save the file as UTF-8", line=line) from exc


# ---------------------------------------------------------------------------------------------
# Parsing


def may_contain_aliases(text: str) -> bool:
    return "*" in text and _ALIAS_TOKEN.search(text) is not None


def _children(node: Any) -> list[Any]:
    value = node.value
    if isinstance(value, list):
        if value and isinstance(value[0], tuple):
            return [part for pair in value for part in pair]
        return value
    return []


def check_alias_expansion(root: Any, limit: int = MAX_ALIAS_EXPANSION) -> None:
    """Refuse a composed document whose aliases expand too far, or refer to themselves.

    Walks the distinct nodes once (iteratively), counting how many nodes full expansion would make.
    """
    sizes: dict[int, int] = {}
    ancestors: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            ancestors.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in _children(node))
            continue
        if key in sizes:
            continue
        if key in ancestors:
            raise ManifestError("a YAML alias refers to a node that contains it (a recursive structure)",
                                line=node.start_mark.line + 1)
        ancestors.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)
    expanded = sizes[id(root)]
    bound = max(limit, 10 * len(sizes))
    if expanded > bound:
        raise ManifestError(f"YAML aliases would expand {len(sizes)} nodes to {expanded}, more than {bound} "
                            "(an alias bomb?); the document was not loaded", line=root.start_mark.line + 1)


def yaml_documents(text: str) -> Iterator[Document]:
    """Documents of a YAML stream with their lines. Raises ManifestError at the first bad one."""
    if not HAS_YAML:  # pragma: no cover
        raise ManifestError("PyYAML is not installed")
    guarded = may_contain_aliases(text)
    loader = _LOADER(text)
    index = 0
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                yield Document("", index, None)
            else:
                if guarded:
                    check_alias_expansion(node)
                yield Document("", index, loader.construct_document(node), node.start_mark.line + 1,
                               node.end_mark.line + 1)
            index += 1
    except ManifestError as exc:
        raise ManifestError(exc.message, index, exc.line) from exc
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = " ".join(p for p in (exc.context, exc.problem) if p) or str(exc)
        raise ManifestError(f"YAML error in document {index} at {where}{problem}", index,
                            mark.line + 1 if mark else None) from exc
    except (yaml.YAMLError, ValueError, TypeError, OverflowError) as exc:
        # SafeConstructor raises ValueError for impossible timestamps such as 2024-13-45.
        raise ManifestError(f"YAML error in document {index}: {exc}", index) from exc
    except RecursionError as exc:
        raise ManifestError(f"document {index} is nested too deeply to load", index) from exc
    finally:
        loader.dispose()


def json_documents(text: str) -> list[Document]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ManifestError(f"JSON error at line {exc.lineno}, column {exc.colno}: {exc.msg}", 0, exc.lineno) from exc
    except RecursionError as exc:
        raise ManifestError("the JSON document is nested too deeply to load", 0) from exc
    except ValueError as exc:
        raise ManifestError(f"JSON error: {exc}", 0) from exc
    return [Document("", 0, data, 1, text.count("\n") + 1)]


def parse_text(text: str, source: str, *, as_json: bool = False) -> tuple[list[Document], LoadError | None]:
    """All documents of one text; on a parse error, those before it and the error."""
    documents: list[Document] = []
    try:
        if as_json:
            documents = json_documents(text)
        else:
            for document in yaml_documents(text):
                documents.append(document)
    except ManifestError as exc:
        return ([Document(source, d.index, d.data, d.line, d.end_line) for d in documents],
                LoadError(source, exc.message, exc.document, exc.line))
    return [Document(source, d.index, d.data, d.line, d.end_line) for d in documents], None


def load_file(path: str, max_size: int = DEFAULT_MAX_FILE_SIZE) -> tuple[list[Document], LoadError | None]:
    try:
        text = read_text(path, max_size)
    except ManifestError as exc:
        return [], LoadError(path, exc.message, None, exc.line)
    return parse_text(text, path, as_json=path.lower().endswith(".json"))


def definition_documents(definition: Any, source: str = "definition") -> tuple[list[Document], LoadError | None,
                                                                                  str | None]:
    """Inline objects (one, or a list) or a YAML string; returns the text too when there was one."""
    if isinstance(definition, str):
        documents, error = parse_text(definition, source)
        return documents, error, definition
    if isinstance(definition, dict):
        return [Document(source, 0, definition)], None, None
    if isinstance(definition, list):
        return [Document(source, i, item) for i, item in enumerate(definition)], None, None
    return [], LoadError(source, f"definition must be an object, a list of objects or a YAML string, not "
                                 f"{type(definition).__name__}"), None


def load_manifests(src: Iterable[str] = (), definition: Any = None,
                   max_file_size: int = DEFAULT_MAX_FILE_SIZE) -> Manifests:
    manifests = Manifests()
    files, manifests.errors = expand_sources(src)
    for path in files:
        documents, error = load_file(path, max_file_size)
        manifests.files.append(path)
        manifests.documents += documents
        if error:
            manifests.errors.append(error)
    if definition is not None:
        documents, error, text = definition_documents(definition)
        manifests.documents += documents
        if error:
            manifests.errors.append(error)
        if text is not None:
            manifests.texts["definition"] = text
    return manifests


# ---------------------------------------------------------------------------------------------
# Lines of findings


def path_tokens(path: str) -> list[str | int]:
    tokens: list[str | int] = []
    for name, index, quoted in _PATH_TOKEN.findall(path):
        if index:
            tokens.append(int(index))
        else:
            tokens.append(quoted if quoted or not name else name)
    return tokens


class LineLocator:
    """Finds the line of a JSON path in a loaded document, re-reading only the files asked about.

    Only documents with findings are composed again, so the cost is small beside the first parse.
    """

    def __init__(self, manifests: Manifests, max_file_size: int = DEFAULT_MAX_FILE_SIZE) -> None:
        self._documents = {(d.source, d.index): d for d in manifests.documents}
        self._texts: dict[str, list[str] | None] = {k: v.splitlines(keepends=True) for k, v in manifests.texts.items()}
        self._max_size = max_file_size

    def _lines(self, source: str) -> list[str] | None:
        if source not in self._texts:
            try:
                self._texts[source] = read_text(source, self._max_size).splitlines(keepends=True)
            except ManifestError:
                self._texts[source] = None
        return self._texts[source]

    def line_of(self, source: str | None, index: int | None, path: str) -> int | None:
        document = self._documents.get((source or "", index if index is not None else -1))
        if document is None or document.line is None or not HAS_YAML:
            return None
        lines = self._lines(document.source)
        if lines is None:
            return document.line
        first, last = document.line, document.end_line or len(lines)
        snippet = "\n" * (first - 1) + "".join(lines[first - 1:last])
        try:
            loader = _LOADER(snippet)
            try:
                node = loader.get_node() if loader.check_node() else None
            finally:
                loader.dispose()
        except yaml.YAMLError:
            return document.line
        return _node_line(node, path_tokens(path)) or document.line


def _node_line(node: Any, tokens: list[str | int]) -> int | None:
    if node is None:
        return None
    line = node.start_mark.line + 1
    for token in tokens:
        child = None
        if isinstance(token, int) and isinstance(node, yaml.SequenceNode):
            child = node.value[token] if token < len(node.value) else None
        elif isinstance(token, str) and isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value == token:
                    child = value  # the last duplicate key wins, as in the loaded data
        if child is None:
            break
        node = child
        line = node.start_mark.line + 1
    return line
