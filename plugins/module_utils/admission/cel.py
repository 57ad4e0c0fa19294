# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The CEL vocabulary of the admission policies: the variables every rule's admission expression
reads (validate/rules.py, ``Admission.findings``), written once.

The API server hands quantities to CEL as strings ("1", "1000m"), offline tools as numbers: every
quantity goes through ``quantity(string(dyn(...)))``. The pod spec is reached through ``dyn`` for
the controllers, so that type checking against each matched kind raises no warning.
"""

from __future__ import annotations

import json
import re

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import DEFAULT_GPU_RESOURCE_PATTERNS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.toolkit import DEVICE_LIST_MOUNT_ROOTS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.visible_devices import DEVICE_VARIABLES, NONE, VOID
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.analysis import (  # the validator's own lists
    _DRIVER_FILE_PREFIXES,
    _GPU_HOST_DIRS,
)


def cel_string(text: str) -> str:
    """A CEL string literal (CEL's double-quoted strings take JSON's escapes)."""
    return json.dumps(text)


def glob_regex(patterns: tuple[str, ...]) -> str:
    """One RE2 regular expression matching any of the shell-style resource name patterns."""
    parts = []
    for pattern in patterns:
        parts.append("".join(".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in pattern))
    return "^(" + "|".join(parts) + ")$"


def _alternatives(words: tuple[str, ...]) -> str:
    return "(" + "|".join(re.escape(w) for w in words) + ")"


GPU_RESOURCE_REGEX = glob_regex(DEFAULT_GPU_RESOURCE_PATTERNS)
# validate/analysis.py gpu_host_path and device_list_mount, on the path as written (no normalising).
GPU_HOST_PATH_REGEX = (
    f"^(/dev|/dev/char|/dev/nvidia[^/]*(/.*)?|{_alternatives(_GPU_HOST_DIRS)}(/.*)?"
    f"|(.*/)?{_alternatives(_DRIVER_FILE_PREFIXES)}[^/]*)/*$"
)
DEVICE_LIST_MOUNT_REGEX = f"^{_alternatives(DEVICE_LIST_MOUNT_ROOTS)}(/.*)?$"
_DEVICE_VARIABLE_LIST = "[" + ", ".join(cel_string(v) for v in DEVICE_VARIABLES) + "]"

# The pod spec and pod metadata of each matched kind (Pod, pods/ephemeralcontainers, the controllers).
_SPEC = (
    "object.kind == 'Pod' ? dyn(object.spec) : object.kind == 'CronJob' ? "
    "dyn(object).spec.jobTemplate.spec.template.spec : dyn(object).spec.template.spec"
)
_POD_METADATA = (
    "object.kind == 'Pod' ? dyn(object.metadata) : object.kind == 'CronJob' ? "
    "dyn(object).spec.jobTemplate.spec.template.?metadata.orValue({}) : dyn(object).spec.template.?metadata.orValue({})"
)


def _env_named(variable: str) -> str:
    """The container's env entries named ``variable`` (a CEL expression)."""
    return f"c.?env.orValue([]).filter(e, e.name == {variable})"


def _last_env(variable: str) -> str:
    """The entry that counts: of duplicates, the kubelet keeps the last."""
    return f"{_env_named(variable)}[{_env_named(variable)}.size() - 1]"


def _selects_gpus(variable: str) -> str:
    """The toolkit's reading of a literal value (gpu/visible_devices.py): split on commas, trimmed;
    void, or no entry, selects no GPU, nor does none."""
    items = f"{_last_env(variable)}.?value.orValue('').split(',').map(s, s.trim()).filter(s, s != '')"
    return (
        f"{_env_named(variable)}.size() > 0 && !has({_last_env(variable)}.valueFrom) && {items}.size() > 0 && "
        f"!({cel_string(VOID)} in {items}) && !({cel_string(NONE)} in {items})"
    )


def _from_reference(variable: str) -> str:
    return f"{_env_named(variable)}.size() > 0 && has({_last_env(variable)}.valueFrom)"


_CONTAINER_HAS_GPU = (
    "c.?resources.?claims.orValue([]).exists(r, r.name in variables.claimNames) || "
    "c.?resources.?limits.orValue({}).exists(k, k.matches("
    + cel_string(GPU_RESOURCE_REGEX)
    + ") && quantity(string(dyn(c.resources.limits[k]))).isGreaterThan(quantity('0')))"
)

# Variables in order: each may read only the ones before it.
VARIABLES: tuple[tuple[str, str], ...] = (
    ("spec", _SPEC),
    ("podAnnotations", f"dyn({_POD_METADATA}).?annotations.orValue({{}})"),
    (
        "containers",
        "variables.spec.containers + variables.spec.?initContainers.orValue([]) + "
        "variables.spec.?ephemeralContainers.orValue([])",
    ),
    ("claimNames", "variables.spec.?resourceClaims.orValue([]).map(r, r.name)"),
    ("gpuContainers", f"variables.containers.filter(c, {_CONTAINER_HAS_GPU}).map(c, c.name)"),
    ("podHasGpu", "variables.gpuContainers.size() > 0 || variables.claimNames.size() > 0"),
    (
        "gpuHostVolumes",
        "variables.spec.?volumes.orValue([]).filter(v, has(v.hostPath) && v.hostPath.path.matches("
        + cel_string(GPU_HOST_PATH_REGEX)
        + ")).map(v, v.name)",
    ),
    ("deviceListMountRegex", cel_string(DEVICE_LIST_MOUNT_REGEX)),
    (
        "deviceEnv",
        # dyn: the values of a map literal must have one type.
        "variables.containers.map(c, {'name': dyn(c.name), 'gpu': dyn(c.name in variables.gpuContainers), "
        f"'selecting': dyn({_DEVICE_VARIABLE_LIST}.filter(v, {_selects_gpus('v')})), "
        f"'unknown': dyn({_DEVICE_VARIABLE_LIST}.filter(v, {_from_reference('v')}))}})",
    ),
)
VARIABLE_NAMES = tuple(name for name, _expression in VARIABLES)

# For the mutating policy: the containers and init containers that request no GPU in any form.
MUTATING_VARIABLES: tuple[tuple[str, str], ...] = (
    ("spec", "object.spec"),
    ("containers", "object.spec.containers + object.spec.?initContainers.orValue([])"),
    ("claimNames", "object.spec.?resourceClaims.orValue([]).map(r, r.name)"),
    ("gpuContainers", f"variables.containers.filter(c, {_CONTAINER_HAS_GPU}).map(c, c.name)"),
)
