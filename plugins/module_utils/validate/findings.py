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

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "name": RULES[self.rule].name if self.rule in RULES else self.rule,
            "severity": self.severity,
            "kind": self.ref.kind,
            "namespace": self.ref.namespace,
            "object_name": self.ref.name,
            "container": self.container,
            "path": self.path,
            "message": self.message,
            "remedy": self.remedy,
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
