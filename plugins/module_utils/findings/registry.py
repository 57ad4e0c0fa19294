# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every kind of finding the collection reports, declared once as data.

A kind says what a finding is (id, severity, title), how its message and remedy are written
(``str.format`` templates over named fields), which checks report it, and for the validator's
kinds whether admission can decide it. A check only says where it hit and with which fields: it
yields a ``Hit``, and ``KindRegistry.finding`` turns the hit into a ``Finding`` with the rest.
The kinds themselves are in ``findings/kinds/``, one module per check; ``KINDS`` joins them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from string import Formatter
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.severity import SEVERITIES

# A validator rule's public code; every other kind's finding id is namespaced by its check.
CODE_ID = re.compile(r"KGPU[0-9]{3}")

# The checks a kind can belong to.
CHECK_VALIDATOR = "validator"
CHECK_DEVICE_PLUGIN = "device_plugin"
CHECK_FLEET = "fleet"
CHECK_HEALTH = "health"
CHECK_PLACEMENT = "placement"
CHECK_PLUGIN_CONFIG = "plugin_config"
CHECK_PLUGIN_DEPLOY = "plugin_deploy"
CHECK_QUARANTINE = "quarantine"
CHECK_RELEASE = "release"
CHECKS = (
    CHECK_VALIDATOR,
    CHECK_DEVICE_PLUGIN,
    CHECK_FLEET,
    CHECK_HEALTH,
    CHECK_PLACEMENT,
    CHECK_PLUGIN_CONFIG,
    CHECK_PLUGIN_DEPLOY,
    CHECK_QUARANTINE,
    CHECK_RELEASE,
)


@dataclass(frozen=True)
class Admission:
    """How an admission policy decides a kind. ``findings`` is a CEL expression over the variables
    the policy defines (admission/cel.py) that gives one line per finding, naming the container; it
    is empty when admission cannot decide the kind, and ``unseen`` says why."""

    findings: str = ""
    unseen: str = ""


API_SERVER_REFUSES = Admission(unseen="the API server's own validation refuses it before admission policies run")


@dataclass(frozen=True)
class Case:
    """One named case of a kind whose severity or wording depends on what the check found (a check
    option that makes warnings errors; the same kind seen by another check with other evidence):
    whatever it sets replaces the kind's own."""

    severity: str = ""
    message: str = ""
    remedy: str = ""


@dataclass(frozen=True)
class Kind:
    id: str
    severity: str
    title: str
    message: str  # str.format over the hit's fields
    remedy: str  # str.format over the hit's fields too
    checks: tuple[str, ...]
    name: str = ""  # a short slug where the id is a code (KGPU101); else the id itself
    allowable: bool = True  # an allow annotation may waive it (validator kinds)
    admission: Admission | None = None  # None: not said whether admission can decide it
    cases: Mapping[str, Case] = field(default_factory=dict)  # a hit names its case, if any

    @property
    def slug(self) -> str:
        return self.name or self.id

    @property
    def finding_id(self) -> str:
        """The id every finding of this kind carries: a validator code as it is (KGPU101), any other
        kind as ``<check>.<name>`` (device_plugin.no_gpu_capacity, placement.fits_now)."""
        return self.id if CODE_ID.fullmatch(self.id) or "." in self.id else f"{self.checks[0]}.{self.id}"

    def fields(self) -> set[str]:
        """The field names its templates use (title, message, remedy, and those of its cases)."""
        templates = [self.title, self.message, self.remedy]
        templates += [t for case in self.cases.values() for t in (case.message, case.remedy)]
        names = [parsed[1] for template in templates for parsed in Formatter().parse(template)]
        return {name.split(".")[0].split("[")[0] for name in names if name}


@dataclass(frozen=True)
class Hit:
    """Where a check hit (``where``: node, subject, object, path, as the check reports them) and the
    fields its kind's templates are written with."""

    kind: str
    fields: Mapping[str, Any] = field(default_factory=dict)
    where: Mapping[str, Any] = field(default_factory=dict)
    case: str = ""  # one of the kind's cases, or "" for the kind as declared


@dataclass(frozen=True)
class Finding:
    kind: Kind
    message: str
    remedy: str
    where: Mapping[str, Any] = field(default_factory=dict)
    title: str = ""  # the kind's title over the hit's fields
    case_severity: str = ""  # the severity of the hit's case, where it sets one

    @property
    def severity(self) -> str:
        return self.case_severity or self.kind.severity

    @property
    def id(self) -> str:
        return self.kind.finding_id


class KindError(ValueError):
    """A kind declared wrongly, or a hit of a kind nobody declared: a bug of the collection."""


class KindRegistry(Mapping[str, Kind]):
    def __init__(self, *groups: Iterable[Kind]):
        self._kinds: dict[str, Kind] = {}
        self._by_finding_id: dict[str, Kind] = {}
        for kind in (k for group in groups for k in group):
            problem = declaration_problem(kind)
            if not problem and (kind.id in self._kinds or kind.finding_id in self._by_finding_id):
                problem = "declared twice"
            if problem:
                raise KindError(f"finding kind {kind.id!r}: {problem}")
            self._kinds[kind.id] = kind
            self._by_finding_id[kind.finding_id] = kind

    def __getitem__(self, kind_id: str) -> Kind:
        """A kind by the id it is declared with, or by the id its findings carry."""
        return self._kinds[kind_id] if kind_id in self._kinds else self._by_finding_id[kind_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._kinds)

    def __len__(self) -> int:
        return len(self._kinds)

    def of_check(self, check: str) -> list[Kind]:
        return [kind for kind in self._kinds.values() if check in kind.checks]

    def finding(self, hit: Hit) -> Finding:
        kind = self._kinds.get(hit.kind) or self._by_finding_id.get(hit.kind)
        if kind is None:
            raise KindError(f"a hit of the undeclared finding kind {hit.kind!r}")
        case = kind.cases.get(hit.case) if hit.case else Case()
        if case is None:
            raise KindError(f"a hit of {hit.kind!r} names the undeclared case {hit.case!r}")
        message, remedy = case.message or kind.message, case.remedy or kind.remedy
        try:
            texts = [template.format(**hit.fields) for template in (message, remedy, kind.title)]
        except (KeyError, IndexError) as missing:
            raise KindError(f"a hit of {hit.kind!r} lacks the field {missing}") from None
        return Finding(kind, texts[0], texts[1], hit.where, texts[2], case.severity)


def declaration_problem(kind: Kind) -> str | None:
    if kind.severity not in SEVERITIES:
        return f"severity {kind.severity!r} is not one of {', '.join(SEVERITIES)}"
    unknown = [c for c in kind.checks if c not in CHECKS]
    if not kind.checks or unknown:
        return f"checks {list(kind.checks)!r} must name some of {', '.join(CHECKS)}"
    if not kind.title or not kind.message or not kind.remedy:
        return "title, message and remedy must all be written"
    wrong = [name for name, case in kind.cases.items() if case.severity and case.severity not in SEVERITIES]
    if wrong:
        return f"case {wrong[0]!r} has a severity that is not one of {', '.join(SEVERITIES)}"
    return None
