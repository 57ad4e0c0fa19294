# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one error base of the collection, and the wording of errors from the API server and the
transport: what failed, on which object, and what to do about it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

_HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"})
_REASONS = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    410: "Gone",
    413: "Request Entity Too Large",
    415: "Unsupported Media Type",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}
_RBAC_DENIAL = re.compile(r"cannot [\w*]+ resource")
_DENIED_USER = re.compile(r'User "([^"]*)"')
ANONYMOUS_USER = "system:anonymous"
# What the kubernetes library logs when an exec credential plugin fails (it then carries on
# without credentials): "exec: process returned <code>. <stderr>", or the OSError of the start.
_EXEC_EXIT = re.compile(r"^exec: process returned (-?\d+)\.?\s*(.*)$", re.DOTALL)
_MISSING_FILE = re.compile(r"^\[Errno 2\] No such file or directory: '(.*)'$")
_NOT_PERMITTED = re.compile(r"^\[Errno 13\] Permission denied")
_NOT_EXECUTABLE = re.compile(r"^\[Errno 8\] Exec format error")
STDERR_TAIL_LINES = 5
STDERR_TAIL_CHARS = 400


class KubegpuError(Exception):
    """The base of every error the collection reports: one message that names what and where, the
    HTTP status if any, and the result fields a module's failure returns besides its message."""

    def __init__(self, message: str, status: int | None = None, result: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.result = dict(result or {})

    def __str__(self) -> str:
        return self.message

    def fail_fields(self) -> dict[str, Any]:
        """What ``fail_json`` takes: the message, the status (unless the error carries a result
        without one) and the result's fields."""
        fields: dict[str, Any] = {"msg": self.message}
        if self.status is not None or not self.result:
            fields["status"] = self.status
        fields.update(self.result)
        return fields


class CheckFailed(KubegpuError):
    """A module's verdict fails the task (an unhealthy plugin, findings at the failing severity, a
    pod that failed): the message says why, the result is what the module returns with it."""


class ClusterError(KubegpuError):
    """Anything that went wrong talking to the cluster; ``status`` is the HTTP status, if any."""


class OptionError(KubegpuError, ValueError):
    """An option value that cannot be used; the message names the option."""


class CredentialError(ClusterError):
    """The credentials of the connection could not be obtained (an exec plugin, an OIDC refresh):
    no request was sent, so the API server's view of an anonymous request is never reported."""


@contextmanager
def error_context(step: str) -> Iterator[None]:
    """Say which step failed: a ClusterError raised inside reads ``<step>: <message>``."""
    try:
        yield
    except ClusterError as exc:
        raise ClusterError(f"{step}: {exc.message}", exc.status) from None


@dataclass(frozen=True)
class ApiTarget:
    """What a raw API path addresses."""

    group: str
    version: str
    resource: str
    namespace: str | None
    name: str | None
    subresource: str | None

    @property
    def rbac_resource(self) -> str:
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


def parse_api_path(path: str) -> ApiTarget | None:
    """Group, version, resource, namespace, name and subresource of a raw API path, if it names one."""
    parts = [p for p in urlsplit(path).path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    if not rest:
        return None
    namespace = None
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else None
    subresource = "/".join(rest[2:]) or None
    return ApiTarget(group, version, resource, namespace, name, subresource)


def rbac_verb(method: str, target: ApiTarget | None) -> str:
    """The RBAC verb an HTTP method maps to on a path (GET on a collection is list)."""
    method = method.upper()
    is_item = target is not None and target.name is not None
    if method in ("GET", "HEAD"):
        return "get" if is_item else "list"
    if method == "DELETE":
        return "delete" if is_item else "deletecollection"
    return {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, method.lower())


def _status_message(body_text: str | None) -> str:
    """The ``message`` of a Status body, or a short, single-line excerpt of another body."""
    if not body_text:
        return ""
    try:
        body = json.loads(body_text)
    except ValueError:
        body = None
    if isinstance(body, dict):
        return str(body.get("message") or body.get("reason") or "").strip()
    text = " ".join(str(body_text).split())
    return text if len(text) <= 200 else text[:200] + "..."


def _causes(body_text: str | None, cause_type: str) -> list[str]:
    """The messages of a Status body's ``details.causes`` of one type (a cause's type is its JSON ``reason``)."""
    try:
        body = json.loads(body_text or "")
    except ValueError:
        return []
    causes = ((body.get("details") or {}).get("causes") or []) if isinstance(body, dict) else []
    return [str(c.get("message")) for c in causes if isinstance(c, dict) and c.get("reason") == cause_type]


def _object_ref(target: ApiTarget) -> str:
    what = f'{target.resource} "{target.name}"' if target.name else f'resource "{target.resource}"'
    if target.subresource:
        what += f" (subresource {target.subresource})"
    if target.namespace:
        what += f' in namespace "{target.namespace}"'
    return what


def describe_api_error(
    status: int, reason: str | None, body_text: str | None, verb: str, path: str, *, credentials_sent: bool = True
) -> str:
    """One clear message for an HTTP error from the API server.

    ``verb`` is the HTTP method (GET, PATCH, ...) or an RBAC verb (list, get, ...);
    ``credentials_sent`` says whether the request carried a token, password or client certificate.
    """
    method = verb.upper() if verb.upper() in _HTTP_METHODS else None
    target = parse_api_path(path)
    rbac = rbac_verb(method, target) if method else verb
    reason = reason or _REASONS.get(status, "")
    api_message = _status_message(body_text)
    request = f"{method or rbac} {urlsplit(path).path}"
    detail = f": {api_message}" if api_message else ""
    label = f"{status} {reason}".strip()

    if status == 401:
        return _unauthenticated(label, request, credentials_sent)
    if status == 403:
        if api_message and not _RBAC_DENIAL.search(api_message):
            # Admission (PodSecurity, quota, a webhook) denied it, not RBAC.
            return f"forbidden ({label}) on {request}{detail}"
        if target is None:
            return f"forbidden ({label}) on {request}{detail}"
        scope = f'in namespace "{target.namespace}"' if target.namespace else "at cluster scope"
        user = _DENIED_USER.search(api_message)
        if user and user.group(1) == ANONYMOUS_USER:
            return _anonymous_denial(label, request, credentials_sent)
        to_user = f' to user "{user.group(1)}"' if user else ""
        return (
            f'forbidden: cannot {rbac} resource "{target.rbac_resource}" {scope}; '
            f'grant the verb "{rbac}" on "{target.rbac_resource}" (apiGroup "{target.group}"){to_user}'
        )
    if status == 429 and target is not None and target.subresource == "eviction":
        refusal = _budget_refusal(body_text, api_message)
        if refusal is not None:
            budget, words = refusal
            return f"refused by {budget} ({label}) on {request}" + (f": {words}" if words else "")
    if status == 404:
        if target is None:
            return f"not found ({label}) on {request}{detail}"
        if target.name is None:
            group = f"{target.group}/{target.version}" if target.group else target.version
            return f'not found: resource "{target.resource}" ({group}) is not served by this API server'
        return f"not found: {_object_ref(target)}"
    return f"{_failure_word(status)} ({label}) on {request}{detail}"


# The cause type of an eviction a PodDisruptionBudget refuses (policy/v1 DisruptionBudgetCause).
DISRUPTION_BUDGET_CAUSE = "DisruptionBudget"
# How kube-apiserver names the budget in that cause (pkg/registry/core/pod/storage/eviction.go:
# "The disruption budget %s needs %d healthy pods and has %d currently", "The disruption budget %s is
# still being processed by the server."); older releases send the message alone, without a cause.
_BUDGET_NAMED = re.compile(r"\bThe disruption budget (\S+) (?:needs|is still being processed)")
_BUDGET_WORDS = "disruption budget"


def budget_named(text: str) -> str | None:
    """The PodDisruptionBudget an eviction's refusal names, in the API server's words; None if it names none."""
    found = _BUDGET_NAMED.search(text or "")
    return found.group(1) if found else None


def _budget_refusal(body_text: str | None, api_message: str) -> tuple[str, str] | None:
    """An eviction's 429 as (the budget that refused it, the API server's words), or None when the 429 is
    the API server throttling (priority and fairness answer any request with 429 and their own message).
    The Eviction API answers 429 when the pod's PodDisruptionBudget allows no disruption now."""
    causes = _causes(body_text, DISRUPTION_BUDGET_CAUSE)
    if not causes and api_message and _BUDGET_WORDS not in api_message.lower():
        return None
    words = "; ".join(causes) or api_message
    name = budget_named(words)
    return (f'PodDisruptionBudget "{name}"' if name else "the pod's PodDisruptionBudget"), words


_FAILURE_WORDS = {409: "conflict", 410: "gone", 422: "invalid", 429: "throttled by the API server"}


def _failure_word(status: int) -> str:
    if status in _FAILURE_WORDS:
        return _FAILURE_WORDS[status]
    return "API server error" if status >= 500 else "request failed"


def _unauthenticated(label: str, request: str, credentials_sent: bool) -> str:
    if not credentials_sent:
        return (
            f"unauthenticated ({label}) on {request}: the request carried no credentials, and the API server "
            "requires them; give a kubeconfig user, api_key, or client_cert and client_key"
        )
    return (
        f"credentials rejected ({label}) on {request}: the token, client certificate or kubeconfig "
        "user is not accepted by the API server (expired or revoked?)"
    )


def _anonymous_denial(label: str, request: str, credentials_sent: bool) -> str:
    # Granting RBAC to system:anonymous would open the cluster to everyone: the fix is credentials.
    if credentials_sent:
        return (
            f"forbidden ({label}) on {request}: the API server did not recognise the credentials sent and "
            f'treated the request as "{ANONYMOUS_USER}" (does something in between, such as a proxy that '
            "ends TLS, drop the client certificate?)"
        )
    return (
        f"forbidden ({label}) on {request}: the request carried no credentials, so the API server treated it "
        f'as "{ANONYMOUS_USER}"; give a kubeconfig user, api_key, or client_cert and client_key'
    )


def one_line(text: str) -> str:
    """Whitespace, newlines included, collapsed to single spaces."""
    return " ".join(str(text).split())


def stderr_tail(text: str) -> str:
    """The end of a program's stderr on one line: its last lines, at most STDERR_TAIL_CHARS characters."""
    lines = [line.strip() for line in text.splitlines() if line.strip()][-STDERR_TAIL_LINES:]
    joined = " ".join(lines)
    return joined if len(joined) <= STDERR_TAIL_CHARS else "..." + joined[-STDERR_TAIL_CHARS:]


def describe_exec_failure(command: str, user: str, logged: str | None, install_hint: str | None = None) -> str:
    """One message for an exec credential plugin that gave no credentials.

    ``logged`` is what the kubernetes library logged about the run (None when it logged nothing
    and still ended up without credentials). Only the plugin's stderr is ever shown: its stdout
    carries the credential.
    """
    head = f'getting credentials: exec plugin "{command}" of kubeconfig user "{user}"'
    if logged is None:
        return f"{head} gave neither a token nor a client certificate"
    exited = _EXEC_EXIT.match(logged.strip())
    if exited:
        code, stderr = int(exited.group(1)), stderr_tail(exited.group(2))
        how = f"was killed by signal {-code}" if code < 0 else f"failed with exit code {code}"
        return f"{head} {how}: {stderr}" if stderr else f"{head} {how} and printed nothing on stderr"
    missing = _MISSING_FILE.match(logged.strip())
    if missing and missing.group(1) == command:
        hint = f"; {one_line(install_hint)}" if install_hint else ""
        where = f"{command} does not exist" if "/" in command else f"no executable {command} on PATH"
        return f"{head} was not found: {where}{hint}"
    if _NOT_PERMITTED.match(logged.strip()):
        return f"{head} cannot be run: permission denied (is {command} executable?)"
    if _NOT_EXECUTABLE.match(logged.strip()):
        return f"{head} cannot be run: {command} is not a program (a script needs a #! line)"
    if logged.startswith("exec: "):
        return f"{head} gave no usable ExecCredential: {one_line(logged[len('exec: ') :])}"
    return f"{head} failed: {_scrub(one_line(logged))}"


def describe_auth_provider_failure(provider: Mapping[str, Any], user: str, exc: BaseException) -> str:
    """One message for an auth-provider (OIDC, gcp) of a kubeconfig user whose token refresh raised.
    kubernetes before 31 raises for an OIDC issuer without a discovery document, where later releases
    leave the expired token as it is: one failure, told alike."""
    name = str(provider.get("name"))
    issuer = (provider.get("config") or {}).get("idp-issuer-url")
    root = exception_chain(exc)[-1]
    if name == "oidc" and getattr(root, "status", None) == 404:
        return describe_expired_oidc_token(user, issuer)
    at = f" at {_scrub(issuer)}" if issuer else ""
    detail = _scrub(one_line(str(root))) or "no detail"
    return (
        f'getting credentials: refreshing the {name} token of kubeconfig user "{user}"{at} failed: '
        f"{type(root).__name__}: {detail}"
    )


def describe_expired_oidc_token(user: str, issuer: str | None) -> str:
    at = f"the issuer {_scrub(issuer)}" if issuer else "the issuer"
    return (
        f'getting credentials: the OIDC id-token of kubeconfig user "{user}" has expired and {at} gave no new '
        "one (check idp-issuer-url, client-id, client-secret and refresh-token of its auth-provider)"
    )


def describe_missing_provider_token(provider: str, user: str) -> str:
    return f'getting credentials: the {provider} auth-provider of kubeconfig user "{user}" gave no token'


def safe_host(host: str) -> str:
    parts = urlsplit(host)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return f"{parts.scheme}://{netloc}" if parts.scheme else netloc or host


def exception_chain(exc: BaseException) -> list[BaseException]:
    """The exception and what it wraps: causes, contexts and urllib3's ``reason``s, outermost first."""
    chain: list[BaseException] = []
    node: BaseException | None = exc
    while node is not None and all(node is not seen for seen in chain):
        chain.append(node)
        wrapped = node.__cause__ or node.__context__ or getattr(node, "reason", None)
        if not isinstance(wrapped, BaseException):
            wrapped = next((arg for arg in node.args if isinstance(arg, BaseException)), None)
        node = wrapped
    return chain


def _scrub(text: str) -> str:
    """Drop user:password@ from any URL in a message."""
    return re.sub(r"//[^/@\s]+@", "//", text)


def is_tls_verification_error(exc: BaseException) -> bool:
    chain = exception_chain(exc)
    return any(type(e).__name__ == "SSLCertVerificationError" for e in chain) or any(
        "CERTIFICATE_VERIFY_FAILED" in str(e) for e in chain
    )


def describe_connection_error(exc: BaseException, host: str, timeout: float | None = None) -> str:
    """One clear message for a transport failure (DNS, refused, timeout, TLS, proxy)."""
    where = safe_host(host)
    server = urlsplit(where).hostname or where
    chain = exception_chain(exc)
    names = {type(e).__name__ for e in chain}
    text = " ".join(str(e) for e in chain)
    root = chain[-1]
    root_text = _scrub(str(root))

    if "ProxyError" in names:
        return f"cannot reach the API server at {where} through the proxy: {type(root).__name__}: {root_text}"
    if is_tls_verification_error(exc):
        why = getattr(root, "verify_message", None) or ""
        match = re.search(r"certificate verify failed: ([^(\]\n]+)", text)
        if not why and match:
            why = match.group(1).strip()
        because = f" ({why})" if why else ""
        return (
            f"TLS certificate verification failed for the API server at {where}{because}; set ca_cert to the "
            "cluster's CA certificate (validate_certs: false skips the check, not recommended)"
        )
    if names & {"SSLError", "SSLZeroReturnError", "SSLEOFError"} or "SSLError" in text:
        lines = [line for line in root_text.splitlines() if line.strip() and line.strip() != "SSLError"]
        detail = lines[-1] if lines else type(root).__name__
        return f"TLS handshake with the API server at {where} failed: {detail}"
    if "NameResolutionError" in names or "gaierror" in names or "Name or service not known" in text:
        return f'cannot resolve the API server host "{server}" (DNS lookup failed)'
    if "ConnectionRefusedError" in names or "Connection refused" in text:
        return f"connection refused by the API server at {where}: is it running, and are host and port right?"
    if "ReadTimeoutError" in names:
        limit = f" within {timeout:g}s" if timeout else ""
        return f"the API server at {where} did not answer{limit} (read timed out)"
    if names & {"ConnectTimeoutError", "TimeoutError", "timeout"}:
        return f"timed out connecting to the API server at {where}"
    if "ProtocolError" in names or "RemoteDisconnected" in names or "ConnectionResetError" in names:
        return f"the connection to the API server at {where} was closed unexpectedly: {root_text}"
    return f"cannot talk to the API server at {where}: {type(root).__name__}: {root_text}"


def error_status(exc: BaseException) -> int | None:
    """The HTTP status an error carries (ClusterError and the client's ApiException), None if none."""
    status = getattr(exc, "status", None)
    return status if isinstance(status, int) else None
