# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Manifests from files, directories, globs and inline definitions, parsed safely."""

from __future__ import annotations

import codecs
import glob
import json
import os
import re
import stat
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import KubegpuError

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
STDIN_PATH = "-"  # as a path: read standard input
STDIN_SOURCE = "<stdin>"  # its name in findings and reports
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")

# A document whose aliases expand its text beyond this many characters (or ten times its own
# length, if that is more) is refused.
MAX_ALIAS_EXPANSION = 16 * 1024 * 1024

# An alias token: `*name` after a space, a flow indicator or a line start. Anything that could be
# an alias matches; a false match (a `*` in a string) only costs a short walk down to it.
_ALIAS_TOKEN = re.compile(r"(?:^|(?<=[\s\[\]{},:?-]))\*[^\s,\[\]{}]", re.MULTILINE)
_GLOB_CHARS = re.compile(r"[*?\[]")
_PATH_TOKEN = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]|\['([^']*)'\]")
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


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


class ManifestError(KubegpuError):
    """One file or definition could not be loaded; the message says what and where."""

    def __init__(self, message: str, document: int | None = None, line: int | None = None) -> None:
        super().__init__(message)
        self.document = document
        self.line = line


class Manifests:
    """The documents of `src` and `definition`, loaded one file at a time as they are iterated.

    Iterate once. Afterwards `errors`, `files` and the document line spans are filled in; the
    documents themselves are not kept, so memory stays flat however large the input is. A path
    of `-` reads `stdin` (a binary stream), whose text is kept for locating lines.
    """

    def __init__(
        self,
        src: Iterable[str] = (),
        definition: Any = None,
        max_file_size: int = DEFAULT_MAX_FILE_SIZE,
        stdin: BinaryIO | None = None,
    ) -> None:
        self.paths, self.errors = expand_sources(src)
        self.definition = definition
        self.max_file_size = max_file_size
        self.stdin = stdin
        self.files: list[str] = []
        self.spans: dict[tuple[str, int], tuple[int, int | None]] = {}
        self.texts: dict[str, str] = {}  # standard input and inline YAML definitions, for locating lines
        self._stdin_error: ManifestError | None = None

    @classmethod
    def of_files(cls, paths: Iterable[str], max_file_size: int, stdin: BinaryIO | None = None) -> Manifests:
        """Sources already expanded (files, and STDIN_SOURCE for standard input), taken as they are."""
        manifests = cls((), None, max_file_size, stdin)
        manifests.paths = list(paths)
        return manifests

    def __iter__(self) -> Iterator[Document]:
        for path in self.paths:
            yield from self.file_documents(path)
        yield from self.definition_documents()

    def file_documents(self, path: str) -> Iterator[Document]:
        self.files.append(path)
        try:
            text = self.read_stdin_text() if path == STDIN_SOURCE else read_text(path, self.max_file_size)
        except ManifestError as exc:
            self.errors.append(LoadError(path, exc.message, None, exc.line))
            return
        if path == STDIN_SOURCE:
            documents = stdin_documents(text, self.errors)
        else:
            documents = text_documents(text, path, self.errors, as_json=path.lower().endswith(".json"))
        yield from self._recorded(documents)

    def definition_documents(self) -> Iterator[Document]:
        if self.definition is not None:
            if isinstance(self.definition, str):
                self.texts["definition"] = self.definition
            yield from self._recorded(definition_documents(self.definition, self.errors))

    def read_stdin_text(self) -> str:
        """Standard input, read once (later calls return the same text). Raises ManifestError."""
        if STDIN_SOURCE in self.texts:
            return self.texts[STDIN_SOURCE]
        if self._stdin_error is None:
            try:
                if self.stdin is None:
                    raise ManifestError("standard input cannot be read here; give files or a definition")
                self.texts[STDIN_SOURCE] = decode_text(read_limited(self.stdin, self.max_file_size))
                return self.texts[STDIN_SOURCE]
            except ManifestError as exc:
                self._stdin_error = exc
        raise ManifestError(self._stdin_error.message, line=self._stdin_error.line)

    def _recorded(self, documents: Iterable[Document]) -> Iterator[Document]:
        for document in documents:
            if document.line is not None:
                self.spans[(document.source, document.index)] = (document.line, document.end_line)
            yield document


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
        if pattern == STDIN_PATH:
            add(STDIN_SOURCE)
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
                for path in directory_manifests(match) if os.path.isdir(match) else [match]:
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


def read_text(path: str, max_size: int = DEFAULT_MAX_FILE_SIZE) -> str:
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise ManifestError("not a regular file")
        if info.st_size > max_size:
            raise ManifestError(f"the file has {info.st_size} bytes, more than the limit of {max_size} (max_file_size)")
        with open(path, "rb") as handle:
            data = handle.read(max_size + 1)
    except OSError as exc:
        raise ManifestError(f"cannot read the file: {exc.strerror or exc}") from exc
    if len(data) > max_size:
        raise ManifestError(f"the file has more than {max_size} bytes, the limit (max_file_size)")
    return decode_text(data)


def read_limited(stream: BinaryIO, max_size: int) -> bytes:
    """All of a stream, refused beyond `max_size` bytes."""
    try:
        data = stream.read(max_size + 1)
    except OSError as exc:
        raise ManifestError(f"cannot read standard input: {exc.strerror or exc}") from exc
    if len(data) > max_size:
        raise ManifestError(f"standard input has more than {max_size} bytes, the limit (max_file_size)")
    return data


def decode_text(data: bytes) -> str:
    """UTF-8, or UTF-16/32 with a byte order mark, as YAML allows."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(encoding).lstrip("\ufeff")
            except UnicodeDecodeError as exc:
                raise ManifestError(
                    f"not valid {encoding.upper()} after its byte order mark: {exc.reason} at byte {exc.start}"
                ) from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ManifestError(
            f"not valid UTF-8: byte 0x{data[exc.start]:02x} at offset {exc.start} (line {line}); "
            "save the file as UTF-8",
            line=line,
        ) from exc


def alias_positions(text: str) -> list[int]:
    """Offsets of everything that could be an alias token (`*name`), in order."""
    if "*" not in text:
        return []
    return [match.start() for match in _ALIAS_TOKEN.finditer(text)]


def _children(node: Any) -> list[Any]:
    value = node.value
    if isinstance(value, list):
        if value and isinstance(value[0], tuple):
            return [part for pair in value for part in pair]
        return value
    return []


def check_alias_expansion(root: Any, aliases: list[int], limit: int = MAX_ALIAS_EXPANSION) -> None:
    """Refuse a composed document whose aliases would expand it too far, or that refers to itself.

    Measures how long the document's text would be with every alias replaced by the text of its
    anchor. Only the nodes whose text holds an alias token are visited: a child that starts
    before its previous sibling ends was composed earlier in the text, so it is an alias.
    """
    bound = max(limit, 10 * (root.end_mark.index - root.start_mark.index))
    sizes: dict[int, int] = {}
    expanding: set[int] = set()

    def expanded(node: Any) -> int:
        start, end = node.start_mark.index, node.end_mark.index
        first = bisect_left(aliases, start)
        if first == len(aliases) or aliases[first] >= end:
            return end - start
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in expanding:
            raise ManifestError(
                "a YAML alias refers to a node that contains it (a recursive structure)", line=node.start_mark.line + 1
            )
        expanding.add(key)
        total = end - start
        previous_end = start
        for child in _children(node):
            child_start = child.start_mark.index
            if child_start < previous_end:
                total += expanded(child)
            else:
                child_end = child.end_mark.index
                total += expanded(child) - (child_end - child_start)
                previous_end = child_end
            if total > bound:
                raise ManifestError(
                    f"YAML aliases would expand the document to more than {bound} characters "
                    "(an alias bomb?); it was not loaded",
                    line=root.start_mark.line + 1,
                )
        expanding.discard(key)
        sizes[key] = total
        return total

    try:
        expanded(root)
    except RecursionError as exc:
        raise ManifestError("YAML aliases are nested too deeply", line=root.start_mark.line + 1) from exc


def yaml_documents(text: str, source: str = "") -> Iterator[Document]:
    """Documents of a YAML stream with their lines, one at a time. Raises ManifestError at the first bad one."""
    if not HAS_YAML:  # pragma: no cover
        raise ManifestError("PyYAML is not installed")
    aliases = alias_positions(text)
    loader = _LOADER(text)
    index = 0
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                yield Document(source, index, None)
            else:
                if aliases:
                    check_alias_expansion(node, aliases)
                yield Document(
                    source, index, loader.construct_document(node), node.start_mark.line + 1, node.end_mark.line + 1
                )
            index += 1
    except ManifestError as exc:
        raise ManifestError(exc.message, index, exc.line) from exc
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = " ".join(p for p in (exc.context, exc.problem) if p) or str(exc)
        raise ManifestError(
            f"YAML error in document {index} at {where}{problem}", index, mark.line + 1 if mark else None
        ) from exc
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        raise ManifestError(
            f"YAML error in document {index}: unacceptable character #x{exc.character:04x} "
            f"({exc.reason}) at line {line}",
            index,
            line,
        ) from exc
    except (yaml.YAMLError, ValueError, TypeError, OverflowError) as exc:
        # SafeConstructor raises ValueError for impossible timestamps such as 2024-13-45.
        raise ManifestError(f"YAML error in document {index}: {exc}", index) from exc
    except RecursionError as exc:
        raise ManifestError(f"document {index} is nested too deeply to load", index) from exc
    finally:
        loader.dispose()


def json_documents(text: str, source: str = "") -> list[Document]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ManifestError(f"JSON error at line {exc.lineno}, column {exc.colno}: {exc.msg}", 0, exc.lineno) from exc
    except RecursionError as exc:
        raise ManifestError("the JSON document is nested too deeply to load", 0) from exc
    except ValueError as exc:
        raise ManifestError(f"JSON error: {exc}", 0) from exc
    return [Document(source, 0, data, 1, text.count("\n") + 1)]


def json_stream_documents(text: str, source: str) -> Iterator[Document]:
    """One or more JSON values one after another (`kubectl get -o json` output, concatenated)."""
    decoder = json.JSONDecoder()
    position, index = 0, 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position == len(text):
            return
        line = text.count("\n", 0, position) + 1
        try:
            data, end = decoder.raw_decode(text, position)
        except json.JSONDecodeError as exc:
            raise ManifestError(
                f"JSON error in document {index} at line {exc.lineno}, column {exc.colno}: {exc.msg}", index, exc.lineno
            ) from exc
        except RecursionError as exc:
            raise ManifestError(f"JSON document {index} is nested too deeply to load", index) from exc
        yield Document(source, index, data, line, text.count("\n", 0, end) + 1)
        position, index = end, index + 1


def stdin_documents(text: str, errors: list[LoadError], source: str = STDIN_SOURCE) -> Iterator[Document]:
    """Standard input: JSON when it starts as JSON does, else a YAML stream. A parse error ends it."""
    try:
        if text.lstrip()[:1] in ("{", "["):
            yield from json_stream_documents(text, source)
        else:
            yield from yaml_documents(text, source)
    except ManifestError as exc:
        errors.append(LoadError(source, exc.message, exc.document, exc.line))


def text_documents(text: str, source: str, errors: list[LoadError], *, as_json: bool = False) -> Iterator[Document]:
    """The documents of one text as they parse; a parse error ends them and is added to `errors`."""
    try:
        yield from (json_documents(text, source) if as_json else yaml_documents(text, source))
    except ManifestError as exc:
        errors.append(LoadError(source, exc.message, exc.document, exc.line))


def parse_text(text: str, source: str, *, as_json: bool = False) -> tuple[list[Document], LoadError | None]:
    """All documents of one text; on a parse error, those before it and the error."""
    errors: list[LoadError] = []
    documents = list(text_documents(text, source, errors, as_json=as_json))
    return documents, errors[0] if errors else None


def definition_documents(definition: Any, errors: list[LoadError], source: str = "definition") -> Iterator[Document]:
    """Inline objects (one, or a list) or a YAML string."""
    if isinstance(definition, str):
        yield from text_documents(definition, source, errors)
    elif isinstance(definition, dict):
        yield Document(source, 0, definition)
    elif isinstance(definition, list):
        yield from (Document(source, i, item) for i, item in enumerate(definition))
    else:
        errors.append(
            LoadError(
                source,
                f"definition must be an object, a list of objects or a YAML string, not {type(definition).__name__}",
            )
        )


def load_manifests(
    src: Iterable[str] = (),
    definition: Any = None,
    max_file_size: int = DEFAULT_MAX_FILE_SIZE,
    stdin: BinaryIO | None = None,
) -> Manifests:
    return Manifests(src, definition, max_file_size, stdin)


def path_tokens(path: str) -> list[str | int]:
    tokens: list[str | int] = []
    for name, index, quoted in _PATH_TOKEN.findall(path):
        if index:
            tokens.append(int(index))
        else:
            tokens.append(quoted if quoted or not name else name)
    return tokens


if HAS_YAML:
    _PARSER: Any = getattr(getattr(yaml, "_yaml", None), "CParser", None) or yaml.SafeLoader

    class _NodeComposer(_PARSER):  # type: ignore[misc,valid-type]
        """Composes nodes without resolving tags: only their positions and key texts are wanted."""

        def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
            return ""

        def descend_resolver(self, *args: Any) -> None:
            pass

        def ascend_resolver(self, *args: Any) -> None:
            pass


class LineLocator:
    """Finds the line of a JSON path in a loaded document, re-reading only the files asked about.

    Only documents with findings are composed again, once each, without tag resolution, so the
    cost is small beside the first parse. One file is held at a time: ask in file order.
    """

    def __init__(self, manifests: Manifests) -> None:
        self._spans = manifests.spans
        self._inline = manifests.texts
        self._max_size = manifests.max_file_size
        self._source: str | None = None
        self._lines: list[str] | None = None
        self._nodes: dict[int, Any] = {}

    def _load(self, source: str) -> None:
        if source == self._source:
            return
        self._source, self._nodes = source, {}
        try:
            text = self._inline[source] if source in self._inline else read_text(source, self._max_size)
        except ManifestError:
            self._lines = None
            return
        self._lines = text.splitlines(keepends=True)

    def _node(self, index: int, first: int, last: int | None) -> Any:
        if index not in self._nodes:
            self._nodes[index] = self._compose(first, last)
        return self._nodes[index]

    def _compose(self, first: int, last: int | None) -> Any:
        if self._lines is None:
            return None
        snippet = "".join(self._lines[first - 1 : last or len(self._lines)])
        try:
            composer = _NodeComposer(snippet)
            try:
                return composer.get_node() if composer.check_node() else None
            finally:
                composer.dispose()
        except yaml.YAMLError:
            return None

    def line_of(self, source: str | None, index: int | None, path: str) -> int | None:
        span = self._spans.get((source or "", index if index is not None else -1))
        if span is None or source is None or index is None or not HAS_YAML:
            return None
        first, last = span
        self._load(source)
        line = _node_line(self._node(index, first, last), path_tokens(path))
        return first + line - 1 if line is not None else first


def _node_line(node: Any, tokens: list[str | int]) -> int | None:
    """The line (1-based, within the composed text) of the deepest node the path reaches."""
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
