# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A finding of the validator: which rule, on which object and field, what and what to do."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.workloads import ObjectRef
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.rules import RULES


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: str
    ref: ObjectRef
    container: str | None
    path: str
    message: str
    remedy: str
    line: int | None = None

    def where(self) -> dict[str, Any]:
        """Where it hit: the object (Kind namespace/name), its file, document and line, the container and field."""
        ref = self.ref
        place = {
            "object": f"{ref.kind} {ref.namespace}/{ref.name}" if ref.namespace else f"{ref.kind} {ref.name}",
            "source": ref.source,
            "document": ref.document,
            "line": self.line if self.line is not None else ref.line,
            "container": self.container,
            "path": self.path,
        }
        return {key: value for key, value in place.items() if value not in (None, "")}

    def to_dict(self) -> dict[str, Any]:
        """The one finding shape (id, severity, title, message, remedy, where), and the keys the validator
        returned before it (rule, name, kind as the object's kind, namespace, object_name, ...)."""
        return {
            "id": self.rule,
            "severity": self.severity,
            "title": RULES[self.rule].title if self.rule in RULES else self.rule,
            "message": self.message,
            "remedy": self.remedy,
            "where": self.where(),
            "rule": self.rule,
            "name": RULES[self.rule].name if self.rule in RULES else self.rule,
            "kind": self.ref.kind,
            "namespace": self.ref.namespace,
            "object_name": self.ref.name,
            "container": self.container,
            "path": self.path,
            "source": self.ref.source,
            "document": self.ref.document,
            "line": self.line if self.line is not None else self.ref.line,
        }


@dataclass(frozen=True)
class Allowed:
    finding: Finding
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {**self.finding.to_dict(), "allowed_reason": self.reason}
