# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The CEL vocabulary of the admission policies: the variables every rule's admission expression
reads (findings/kinds/validator.py, ``Admission.findings``), written once.

The API server hands quantities to CEL as strings ("1", "1000m"), offline tools as numbers: every
quantity goes through ``quantity(string(dyn(...)))``. The pod spec is reached through ``dyn`` for
the controllers, so that type checking against each matched kind raises no warning.
"""

from __future__ import annotations

import json
import re

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.cuda_images import KNOWN_IMAGE_FAMILIES
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.host_paths import (
    DRIVER_FILE_PREFIXES,
    GPU_HOST_DIRS,
    GPU_PATH_PARENTS,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.intent import (
    DOCKER_HUB_PREFIXES,
    GPU_NODE_LABEL,
    GPU_WORDS,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.other_accelerators import (
    NVIDIA_WORD,
    OTHER_ACCELERATOR,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import DEFAULT_GPU_RESOURCE_PATTERNS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.toolkit import DEVICE_LIST_MOUNT_ROOTS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.visible_devices import DEVICE_VARIABLES, NONE, VOID
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.workload_kinds import (
    EACH_ITEM,
    EACH_VALUE,
    POD_TEMPLATE,
    WORKLOAD_KINDS,
    TemplatePath,
    WorkloadKind,
)


def cel_string(text: str) -> str:
    """A CEL string literal (CEL's double-quoted strings take JSON's escapes)."""
    return json.dumps(text)


def glob_regex(patterns: tuple[str, ...]) -> str:
    """One RE2 regular expression matching any of the shell-style resource name patterns."""
    return "^(" + "|".join(_glob_part(pattern) for pattern in patterns) + ")$"


def _glob_part(pattern: str) -> str:
    """A shell-style pattern as RE2: `*`, `?` and character classes such as `[A-Z]` (not negated ones)."""
    out: list[str] = []
    index = 0
    while index < len(pattern):
        ch = pattern[index]
        end = pattern.find("]", index + 2) if ch == "[" else -1
        if end != -1 and pattern[index + 1] not in "!^":
            out.append(pattern[index : end + 1])
            index = end + 1
            continue
        out.append(".*" if ch == "*" else "." if ch == "?" else re.escape(ch))
        index += 1
    return "".join(out)


def _alternatives(words: tuple[str, ...]) -> str:
    return "(" + "|".join(re.escape(w) for w in words) + ")"


GPU_RESOURCE_REGEX = glob_regex(DEFAULT_GPU_RESOURCE_PATTERNS)
# validate/analysis.py gpu_host_path and device_list_mount, on the path as written (no normalising).
GPU_HOST_PATH_REGEX = (
    f"^(/dev|/dev/char|/dev/nvidia[^/]*(/.*)?|{_alternatives(GPU_HOST_DIRS)}(/.*)?"
    f"|(.*/)?{_alternatives(DRIVER_FILE_PREFIXES)}[^/]*)/*$"
)
DEVICE_LIST_MOUNT_REGEX = f"^{_alternatives(DEVICE_LIST_MOUNT_ROOTS)}(/.*)?$"
# validate/analysis.py parent_of_gpu_paths, on the path as written (trailing slashes allowed).
GPU_PARENT_PATH_REGEX = "^(" + "|".join(GPU_PATH_PARENTS) + ")/*$"
_DEVICE_VARIABLE_LIST = "[" + ", ".join(cel_string(v) for v in DEVICE_VARIABLES) + "]"


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

# validate/rules.py gpu_intent and validate/analysis.py pod_gpu_intent and privilege_escalations, over
# what the object holds (not the image_env option, nor env that envFrom brings).
_ESCALATION = (
    "c.?securityContext.?privileged.orValue(false) == true || c.?securityContext.?capabilities.?add.orValue([])"
    ".exists(a, string(a).trim().upperAscii() in ['SYS_ADMIN', 'ALL', 'CAP_SYS_ADMIN', 'CAP_ALL'])"
)
_GPU_WORDS = cel_string(f"(?i)({GPU_WORDS})")
_GPU_LABEL = cel_string(f"(?i)({GPU_NODE_LABEL})")
_OTHER = cel_string(f"(?i)({OTHER_ACCELERATOR})")
_NVIDIA = cel_string(f"(?i){NVIDIA_WORD}")


def _names_other(text: str) -> str:
    """gpu/other_accelerators.py names_other_accelerator over a CEL string."""
    return f"({text}.matches({_OTHER}) && !{text}.matches({_NVIDIA}))"


# gpu/other_accelerators.py requirement_names_other over a node selector requirement x.
_REQUIREMENT_VALUE = "(x.key + '=' + v)"
_REQUIREMENT_OTHER = (
    f"({_names_other('x.key')} || (x.?values.orValue([]).size() > 0 && "
    f"x.values.all(v, {_names_other(_REQUIREMENT_VALUE)})))"
)
_HUB = "^(?:(?:" + "|".join(re.escape(p.rstrip("/")) for p in DOCKER_HUB_PREFIXES) + ")/)?(?:library/)?"


def _family_pattern(pattern: str) -> str:
    """A family's pattern over the repository as gpu/intent.py image_repository leaves it, for the
    lower-cased repository as written (Docker Hub's registry and library/ still on it)."""
    if not pattern.startswith("^"):
        raise ValueError(f"image family pattern {pattern!r} must be anchored at the start")
    return _HUB + pattern[1:]


def image_family_expression(image: str) -> str:
    """Whether an image (a CEL string) is of a known CUDA image family: repository and tag as
    image_repository splits them (the tag after the last ':' behind the last '/', no digest)."""
    families = " || ".join(
        f"repo.matches({cel_string(_family_pattern(f.pattern.pattern))})"
        + (f" && tag.matches({cel_string(f.tag_pattern.pattern)})" if f.tag_pattern else "")
        for f in KNOWN_IMAGE_FAMILIES
    )
    return (
        f"[{image}.trim().split('@')[0]].map(ref, [ref.find(':[^/:]*$')].map(suffix, "
        "[ref.substring(0, ref.size() - suffix.size()).lowerAscii()].map(repo, "
        f"[suffix == '' ? '' : suffix.substring(1)].map(tag, {families})[0])[0])[0])[0]"
    )


_DEVICE_VARIABLE_VOID = (
    "!has(e.valueFrom) && [e.?value.orValue('').split(',').map(s, s.trim()).filter(s, s != '')]"
    f".map(l, l.size() == 0 || {cel_string(VOID)} in l)[0]"
)
_CONTAINER_GPU_INTENT = " || ".join(
    (
        f"c.?resources.?limits.orValue({{}}).exists(k, k.matches({cel_string(GPU_RESOURCE_REGEX)}))",
        f"c.?resources.?requests.orValue({{}}).exists(k, k.matches({cel_string(GPU_RESOURCE_REGEX)}))",
        "c.?resources.?claims.orValue([]).size() > 0",
        "c.?env.orValue([]).exists(e, (e.name.startsWith('NVIDIA_') || e.name == 'CUDA_VISIBLE_DEVICES') && "
        f"!(e.name in {_DEVICE_VARIABLE_LIST} && {_DEVICE_VARIABLE_VOID}))",
        f"string(c.?image.orValue('')).matches({_GPU_WORDS})",
        "(" + image_family_expression("string(c.?image.orValue(''))") + ")",
        f"(c.?command.orValue([]) + c.?args.orValue([])).map(a, string(a)).join(' ').matches({_GPU_WORDS})",
        "c.?volumeMounts.orValue([]).exists(m, m.name in variables.gpuHostVolumes || "
        "m.mountPath.matches(variables.deviceListMountRegex))",
    )
)
_SELECTOR_ENTRY = "(k + '=' + string(variables.spec.nodeSelector[k]))"
_TOLERATION_WORDS = "(string(t.?key.orValue('')) + ' ' + string(t.?value.orValue('')))"
# validate/analysis.py pod_gpu_intent: a label that names another vendor's accelerator is no sign.
_POD_GPU_INTENT = " || ".join(
    (
        f"variables.spec.?nodeSelector.orValue({{}}).exists(k, k.matches({_GPU_LABEL}) && "
        f"!{_names_other(_SELECTOR_ENTRY)})",
        "variables.spec.?affinity.?nodeAffinity.?requiredDuringSchedulingIgnoredDuringExecution.?nodeSelectorTerms"
        f".orValue([]).exists(t, t.?matchExpressions.orValue([]).exists(x, x.key.matches({_GPU_LABEL}) && "
        f"!{_REQUIREMENT_OTHER}))",
        "variables.spec.?affinity.?nodeAffinity.?preferredDuringSchedulingIgnoredDuringExecution.orValue([])"
        f".exists(p, p.?preference.?matchExpressions.orValue([]).exists(x, x.key.matches({_GPU_LABEL}) && "
        f"!{_REQUIREMENT_OTHER}))",
        f"variables.spec.?tolerations.orValue([]).exists(t, {_TOLERATION_WORDS}.matches({_GPU_LABEL}) && "
        f"!{_names_other(_TOLERATION_WORDS)})",
        "string(variables.spec.?runtimeClassName.orValue('')).lowerAscii().contains('nvidia')",
    )
)
_RESOURCE_NAMES = "(c.?resources.?limits.orValue({}).map(k, k) + c.?resources.?requests.orValue({}).map(k, k))"
# validate/analysis.py other_accelerator_placement: a node selector entry, a required node affinity every
# term of which names another vendor's accelerator, or its resource; never beside NVIDIA's.
_OTHER_ACCELERATOR = (
    f"!(variables.containers.exists(c, {_RESOURCE_NAMES}.exists(k, k.matches({_NVIDIA}))) || "
    f"string(variables.spec.?runtimeClassName.orValue('')).matches({_NVIDIA})) && ("
    f"variables.spec.?nodeSelector.orValue({{}}).exists(k, {_names_other(_SELECTOR_ENTRY)}) || "
    "[variables.spec.?affinity.?nodeAffinity.?requiredDuringSchedulingIgnoredDuringExecution.?nodeSelectorTerms"
    ".orValue([])].exists(terms, terms.size() > 0 && terms.all(t, t.?matchExpressions.orValue([]).exists(x, "
    f"(x.operator == 'In' || x.operator == 'Exists') && {_REQUIREMENT_OTHER}))) || "
    f"variables.containers.exists(c, {_RESOURCE_NAMES}.exists(k, {_names_other('k')})))"
)
# validate/rules.py parent_mount_reach, for each container c that mounts such a volume: the mount reaches
# GPUs when c is privileged; else not on another vendor's accelerator nodes; else when it is writable or c
# shows GPU intent. Privilege and intent are worked out once per container (bound as esc and intent).
_PARENT_MOUNTS = (
    f"[{_ESCALATION}].map(esc, [variables.podGpuIntent || {_CONTAINER_GPU_INTENT}].map(intent, "
    "{'name': dyn(c.name), 'volumes': dyn(c.volumeMounts.filter(m, m.name in variables.parentHostVolumes && "
    "(esc || !variables.otherAccelerator && (!m.?readOnly.orValue(false) || intent))).map(m, m.name))})[0])[0]"
)

# The variables of one pod template, in order: each may read only the ones before it and
# ``variables.template`` (the template: a Pod, or a PodTemplateSpec with spec and optional metadata).
POD_VARIABLES: tuple[tuple[str, str], ...] = (
    ("spec", "dyn(variables.template).spec"),
    ("podAnnotations", "dyn(variables.template).?metadata.?annotations.orValue({})"),
    (
        "containers",
        "variables.spec.?containers.orValue([]) + variables.spec.?initContainers.orValue([]) + "
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
        "parentHostVolumes",
        "variables.spec.?volumes.orValue([]).filter(v, has(v.hostPath) && v.hostPath.path.matches("
        + cel_string(GPU_PARENT_PATH_REGEX)
        + ")).map(v, v.name)",
    ),
    ("otherAccelerator", _OTHER_ACCELERATOR),
    ("podGpuIntent", _POD_GPU_INTENT),
    # The privileged containers (privileged, SYS_ADMIN or ALL capabilities) that show GPU intent, by name.
    (
        "privilegedGpuIntent",
        f"variables.containers.filter(c, ({_ESCALATION}) && (variables.podGpuIntent || {_CONTAINER_GPU_INTENT}))"
        ".map(c, c.name)",
    ),
    # The containers whose hostPath volumes of / or a parent of the GPU paths reach GPUs, with those volumes.
    (
        "gpuParentMounts",
        "variables.containers.filter(c, c.?volumeMounts.orValue([]).exists(m, m.name in variables.parentHostVolumes))"
        f".map(c, {_PARENT_MOUNTS}).filter(p, p.volumes.size() > 0)",
    ),
    (
        "deviceEnv",
        # dyn: the values of a map literal must have one type.
        "variables.containers.map(c, {'name': dyn(c.name), 'gpu': dyn(c.name in variables.gpuContainers), "
        f"'selecting': dyn({_DEVICE_VARIABLE_LIST}.filter(v, {_selects_gpus('v')})), "
        f"'unknown': dyn({_DEVICE_VARIABLE_LIST}.filter(v, {_from_reference('v')}))}})",
    ),
)
POD_VARIABLE_NAMES = tuple(name for name, _expression in POD_VARIABLES)
TEMPLATE = "template"
POD = "pod"  # the iteration variable of a rule's findings over the pods
_VARIABLE_REFERENCE = re.compile(r"\bvariables\.(\w+)\b")


def _bound(expression: str, names: tuple[str, ...]) -> str:
    """The expression with ``variables.<name>`` of the given names read from a bound identifier."""
    return _VARIABLE_REFERENCE.sub(lambda m: m.group(1) if m.group(1) in names else m.group(0), expression)


def per_pod(expression: str) -> str:
    """A rule's findings, written over the pod variables, for one element of ``variables.pods``."""
    return _VARIABLE_REFERENCE.sub(
        lambda m: f"{POD}.{m.group(1)}" if m.group(1) in POD_VARIABLE_NAMES else m.group(0), expression
    )


def pod_record(template: str) -> str:
    """The pod variables of one template as a map. CEL has no let: ``[value].map(name, body)[0]``
    binds each value to its name for the ones after it."""
    names = (TEMPLATE, *POD_VARIABLE_NAMES)
    body = "{" + ", ".join(f"{cel_string(n)}: dyn({n})" for n in POD_VARIABLE_NAMES) + "}"
    for name, expression in reversed(((TEMPLATE, template), *POD_VARIABLES)):
        body = f"[{_bound(expression, names)}].map({name}, {body})[0]"
    return body


# --- Where the pod templates of each matched kind are ----------------------------------------------------


def _step(step: str) -> str:
    return f".?{step}"


def template_path_expression(path: TemplatePath) -> str:
    """The templates at one path of the workload table, as a list (CEL): an absent step gives none,
    a map (``*``) or list (``[]``) step gives one per value or item."""
    fan_outs = [i for i, step in enumerate(path.steps) if step in (EACH_VALUE, EACH_ITEM)]
    if len(fan_outs) > 1:
        raise ValueError(f"{path.text()}: admission reaches templates through one map or list at most")
    if not fan_outs:
        return f"[dyn(object){''.join(_step(s) for s in path.steps)}].filter(o, o.hasValue()).map(o, o.value())"
    at = fan_outs[0]
    before, after = path.steps[:at], path.steps[at + 1 :]
    reach = "dyn(object)" + "".join(_step(s) for s in before)
    if path.steps[at] == EACH_VALUE:
        items = f"[{reach}.orValue({{}})].map(m, m.map(k, m[k]))[0]"
    else:
        items = f"{reach}.orValue([])"
    inner = "optional.of(x)" + "".join(_step(s) for s in after)
    return f"{items}.map(x, {inner}).filter(o, o.hasValue()).map(o, o.value())"


def admission_workload_kinds() -> tuple[WorkloadKind, ...]:
    """The custom-resource kinds whose every template is a PodTemplateSpec (Argo's templates,
    KServe's inline containers and the Trainer's container fields are not pod templates)."""
    return tuple(k for k in WORKLOAD_KINDS if all(t.form == POD_TEMPLATE for t in k.templates))


def kind_templates(kind: WorkloadKind) -> str:
    return " + ".join(template_path_expression(t) for t in kind.templates)


def _is_resource(group: str, resource: str) -> str:
    return f"request.resource.group == {cel_string(group)} && request.resource.resource == {cel_string(resource)}"


def templates_expression() -> str:
    """The pod templates of the object under admission, by its kind: a Pod is its own template."""
    branches = [
        ("object.kind == 'Pod'", "[dyn(object)]"),
        (_is_resource("batch", "cronjobs"), "[dyn(object).spec.jobTemplate.spec.template]"),
    ]
    branches += [(_is_resource(k.group, k.resource), kind_templates(k)) for k in admission_workload_kinds()]
    expression = "[dyn(object).spec.template]"  # the pod controllers
    for condition, templates in reversed(branches):
        expression = f"{condition} ? {templates} : {expression}"
    return expression


# The policy's variables before the rules' findings: the templates, then each one's pod variables.
VARIABLES: tuple[tuple[str, str], ...] = (
    ("templates", templates_expression()),
    ("pods", f"variables.templates.map(t, {pod_record('t')})"),
)
VARIABLE_NAMES = tuple(name for name, _expression in VARIABLES)

# For the mutating policy: the containers and init containers it leaves alone. Those that request
# GPUs in any form, and those whose own env names a device variable (by value or valueFrom): the
# validating policies judge those with their rule's message, which a rewrite would hide from them
# (mutating policies run first).
MUTATING_VARIABLES: tuple[tuple[str, str], ...] = (
    ("spec", "object.spec"),
    ("containers", "object.spec.containers + object.spec.?initContainers.orValue([])"),
    ("claimNames", "object.spec.?resourceClaims.orValue([]).map(r, r.name)"),
    (
        "leftAlone",
        f"variables.containers.filter(c, {_CONTAINER_HAS_GPU} || "
        f"c.?env.orValue([]).exists(e, e.name in {_DEVICE_VARIABLE_LIST})).map(c, c.name)",
    ),
)
