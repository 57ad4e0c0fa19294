# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Label selectors in their text form, parsed once and matched in memory."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.placement import selector_expression
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import as_list, as_mapping, string_map

_SELECTOR_TERM = re.compile(
    r"^\s*(?:"
    r"(?P<absent>!)\s*(?P<absent_key>[^\s!=(),]+)"
    r"|(?P<set_key>[^\s!=(),]+)\s+(?P<set_op>in|notin)\s*\((?P<values>[^()]*)\)"
    r"|(?P<cmp_key>[^\s!=(),]+)\s*(?P<cmp_op>==|!=|=)\s*(?P<cmp_value>[^\s!=(),]*)"
    r"|(?P<exists_key>[^\s!=(),]+)"
    r")\s*$"
)


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str  # one of =, !=, in, notin, exists, !exists
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.operator == "exists":
            return present
        if self.operator == "!exists":
            return not present
        if self.operator in ("=", "in"):
            return present and value in self.values
        return not present or value not in self.values  # != and notin


@dataclass(frozen=True)
class LabelSelector:
    text: str
    requirements: tuple[Requirement, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(requirement.matches(labels) for requirement in self.requirements)


def _split_selector_terms(text: str) -> list[str]:
    terms: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(char)
    terms.append("".join(current))
    return terms


def _parse_requirement(term: str, text: str) -> Requirement:
    match = _SELECTOR_TERM.match(term)
    if not match:
        raise OptionError(f"label selector {text!r}: cannot read {term.strip()!r}")
    if match["absent_key"]:
        return Requirement(match["absent_key"], "!exists")
    if match["set_key"]:
        values = frozenset(v.strip() for v in match["values"].split(",") if v.strip())
        return Requirement(match["set_key"], match["set_op"], values)
    if match["cmp_key"]:
        operator = "=" if match["cmp_op"] == "==" else match["cmp_op"]
        return Requirement(match["cmp_key"], operator, frozenset({match["cmp_value"]}))
    return Requirement(match["exists_key"], "exists")


def parse_label_selector(text: object) -> LabelSelector:
    """Parse a Kubernetes label selector string (=, ==, !=, in, notin, key, !key)."""
    if not isinstance(text, str) or not text.strip():
        raise OptionError(f"label selector {text!r} is empty or not a string")
    return LabelSelector(text, tuple(_parse_requirement(term, text) for term in _split_selector_terms(text)))


def selector_text(selector: object) -> str | None:
    """A metav1.LabelSelector as a selector string, or None when it selects nothing usable."""
    raw = as_mapping(selector)
    terms = [f"{k}={v}" for k, v in sorted(string_map(raw.get("matchLabels")).items())]
    for expression in filter(None, map(selector_expression, as_list(raw.get("matchExpressions")))):
        key, operator, values = expression["key"], expression["operator"], ",".join(expression["values"])
        terms.append(
            {
                "In": f"{key} in ({values})",
                "NotIn": f"{key} notin ({values})",
                "Exists": key,
                "DoesNotExist": f"!{key}",
            }.get(operator, "")
        )
    if not terms or not all(terms):
        return None
    return ",".join(terms)
