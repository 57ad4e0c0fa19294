# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One Kubernetes API client built from connection options, with retries and clear errors.

The options, their aliases and their ``K8S_AUTH_*`` environment variables are those of
kubernetes.core, so one kubeconfig setting serves both collections. The official
``kubernetes`` library is used for configuration (kubeconfig, in-cluster, exec plugins) and
for its REST transport only: responses are decoded with ``json.loads`` into plain dicts,
never into the generated models, which are far too slow for lists of many thousand pods.

Nothing else in the collection imports the kubernetes library's configuration code.
"""

from __future__ import annotations

import email.utils
import json
import os
import random
import re
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn
from urllib.parse import urlencode, urlsplit

try:
    import urllib3
    import yaml
    from kubernetes import config as k8s_config
    from kubernetes.client import ApiClient, Configuration
    from kubernetes.client.exceptions import ApiException
    from kubernetes.config.config_exception import ConfigException
except ImportError:
    HAS_KUBERNETES = False
    KUBERNETES_IMPORT_ERROR: str | None = traceback.format_exc()
else:
    HAS_KUBERNETES = True
    KUBERNETES_IMPORT_ERROR = None

# Same option names, aliases and semantics as kubernetes.core's AUTH_ARG_SPEC. No defaults
# here: an unset option falls back to its K8S_AUTH_* variable in resolve_auth_params().
AUTH_ARG_SPEC: dict[str, dict[str, Any]] = {
    "kubeconfig": {"type": "raw"},
    "context": {"type": "str"},
    "host": {"type": "str"},
    "api_key": {"type": "str", "no_log": True},
    "username": {"type": "str"},
    "password": {"type": "str", "no_log": True},
    "validate_certs": {"type": "bool", "aliases": ["verify_ssl"]},
    "ca_cert": {"type": "path", "aliases": ["ssl_ca_cert"]},
    "client_cert": {"type": "path", "aliases": ["cert_file"]},
    "client_key": {"type": "path", "aliases": ["key_file"]},
    "proxy": {"type": "str"},
    "no_proxy": {"type": "str"},
    "impersonate_user": {"type": "str"},
    "impersonate_groups": {"type": "list", "elements": "str"},
}

# Option -> environment variables, first match wins. kubernetes.core reads K8S_AUTH_<OPTION>
# and then K8S_AUTH_<name in the kubernetes client>; the latter are the documented ones.
AUTH_ENV_VARS: dict[str, tuple[str, ...]] = {
    "kubeconfig": ("K8S_AUTH_KUBECONFIG",),
    "context": ("K8S_AUTH_CONTEXT",),
    "host": ("K8S_AUTH_HOST",),
    "api_key": ("K8S_AUTH_API_KEY",),
    "username": ("K8S_AUTH_USERNAME",),
    "password": ("K8S_AUTH_PASSWORD",),
    "validate_certs": ("K8S_AUTH_VALIDATE_CERTS", "K8S_AUTH_VERIFY_SSL"),
    "ca_cert": ("K8S_AUTH_CA_CERT", "K8S_AUTH_SSL_CA_CERT"),
    "client_cert": ("K8S_AUTH_CLIENT_CERT", "K8S_AUTH_CERT_FILE"),
    "client_key": ("K8S_AUTH_CLIENT_KEY", "K8S_AUTH_KEY_FILE"),
    "proxy": ("K8S_AUTH_PROXY",),
    "no_proxy": ("K8S_AUTH_NO_PROXY",),
    "impersonate_user": ("K8S_AUTH_IMPERSONATE_USER",),
    "impersonate_groups": ("K8S_AUTH_IMPERSONATE_GROUPS",),
}

DEFAULT_KUBECONFIG = "~/.kube/config"
IN_CLUSTER_ENV = "KUBERNETES_SERVICE_HOST"
USER_AGENT = "kubegpu.scheduling"

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
# Statuses for which the API server has provably not acted on a request: throttled by
# priority-and-fairness or max-requests-inflight (429), or not served at all (503).
NOT_PROCESSED_STATUSES = frozenset({429, 503})
MAX_RETRY_AFTER = 30.0
THROTTLE_RETRIES = 10
MAX_BACKOFF = 30.0

_TRUE = frozenset({"1", "true", "yes", "on", "y", "t"})
_FALSE = frozenset({"0", "false", "no", "off", "n", "f"})
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


class ClusterError(Exception):
    """One clear message for anything that went wrong talking to the cluster."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status

    def __str__(self) -> str:
        return self.message


# ---------------------------------------------------------------------------------------
# Connection options
# ---------------------------------------------------------------------------------------


def _to_bool(value: Any, source: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ClusterError(f"{source}: {value!r} is not a boolean (use true or false)")


def _to_str_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return [str(part) for part in value]


def _expand_path(value: str) -> str:
    return os.path.expanduser(os.path.expandvars(value))


def resolve_auth_params(params: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Each connection option from the parameters, else its K8S_AUTH_* variable, else None.

    Aliases are accepted too (a CLI's dict may use them; Ansible has already folded them).
    Values are normalised: booleans parsed, group lists split on commas, paths expanded.
    """
    env = os.environ if environ is None else environ
    resolved: dict[str, Any] = {}
    for option, spec in AUTH_ARG_SPEC.items():
        value = params.get(option)
        source = option
        for alias in spec.get("aliases", ()):
            if value is None:
                value, source = params.get(alias), alias
        if value is None:
            for var in AUTH_ENV_VARS[option]:
                if env.get(var):
                    value, source = env[var], var
                    break
        if value is not None:
            if spec.get("type") == "bool":
                value = _to_bool(value, source)
            elif spec.get("type") == "list":
                value = _to_str_list(value)
            elif spec.get("type") == "path":
                value = _expand_path(str(value))
            elif option == "kubeconfig" and isinstance(value, str):
                value = _expand_path(value)
            elif option == "kubeconfig" and not isinstance(value, dict):
                raise ClusterError("kubeconfig must be a path or a dict (the parsed kubeconfig)")
        resolved[option] = value
    return resolved


def has_explicit_credentials(auth: Mapping[str, Any]) -> bool:
    """Whether host plus credentials are given, so that no kubeconfig is needed (as kubernetes.core)."""
    return bool(
        auth.get("host")
        and (
            auth.get("api_key")
            or (auth.get("username") and auth.get("password"))
            or (auth.get("client_cert") and auth.get("client_key"))
        )
    )


def kubeconfig_secret_values(kubeconfig: Any) -> set[str]:
    """The string values of an in-memory kubeconfig's users, for a module's ``no_log_values``."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
        elif isinstance(node, str) and len(node) > 3:
            found.add(node)

    if isinstance(kubeconfig, dict):
        walk(kubeconfig.get("users"))
    return found


def _named(entries: Any) -> list[str]:
    if not isinstance(entries, list):
        return []
    return [str(entry["name"]) for entry in entries if isinstance(entry, dict) and "name" in entry]


def check_kubeconfig(data: Any, source: str, context: str | None) -> str:
    """Check a parsed kubeconfig's shape and context before the kubernetes library loads it.

    Returns the context that will be used. Messages name the source and the context names,
    never any value from the users section.
    """
    if not isinstance(data, dict):
        raise ClusterError(f"kubeconfig {source} is invalid: expected a mapping with clusters, contexts and users")
    contexts = _named(data.get("contexts"))
    if context is None:
        context = data.get("current-context") or None
        if context is None:
            hint = f"; available contexts: {', '.join(contexts)}" if contexts else ""
            raise ClusterError(f"kubeconfig {source} has no current-context; set the context option{hint}")
    if context not in contexts:
        available = ", ".join(contexts) if contexts else "none"
        raise ClusterError(f'context "{context}" not found in kubeconfig {source}; available contexts: {available}')
    entry = next(c for c in data["contexts"] if isinstance(c, dict) and c.get("name") == context)
    cluster = (entry.get("context") or {}).get("cluster") if isinstance(entry.get("context"), dict) else None
    if cluster is None:
        raise ClusterError(f'kubeconfig {source} is invalid: context "{context}" names no cluster')
    if cluster not in _named(data.get("clusters")):
        raise ClusterError(f'kubeconfig {source} is invalid: cluster "{cluster}" of context "{context}" is not defined')
    return str(context)


def _yaml_problem(exc: Exception) -> str:
    # Only the problem and its position: the snippet a YAML error carries may show a secret.
    problem = getattr(exc, "problem", None) or type(exc).__name__
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{problem}{where}"


def _read_kubeconfig_file(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return yaml.safe_load(handle)
    except yaml.YAMLError as exc:
        raise ClusterError(f"kubeconfig {path} is not valid YAML: {_yaml_problem(exc)}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ClusterError(f"kubeconfig {path} cannot be read: {getattr(exc, 'strerror', None) or exc}") from None


def _merge_kubeconfigs(paths: list[str]) -> dict[str, Any]:
    # KUBECONFIG-style lists: the first file that defines a name wins, as in kubectl.
    merged: dict[str, Any] = {"clusters": [], "contexts": [], "users": []}
    for path in paths:
        data = _read_kubeconfig_file(path)
        if not isinstance(data, dict):
            check_kubeconfig(data, path, None)
        for key in ("clusters", "contexts", "users"):
            seen = set(_named(merged[key]))
            merged[key].extend(e for e in data.get(key) or [] if isinstance(e, dict) and e.get("name") not in seen)
        if data.get("current-context") and not merged.get("current-context"):
            merged["current-context"] = data["current-context"]
    return merged


def _kubeconfig_paths(value: str, origin: str) -> list[str]:
    parts = [_expand_path(p) for p in value.split(os.pathsep) if p]
    existing = [p for p in parts if os.path.isfile(p)]
    if not existing:
        shown = value if len(parts) != 1 else parts[0]
        raise ClusterError(f"kubeconfig file not found: {shown} ({origin})")
    return existing


def _load_kubeconfig(cfg: Configuration, kubeconfig: Any, context: str | None, origin: str) -> None:
    if isinstance(kubeconfig, dict):
        source = "(given as a dict)"
        context = check_kubeconfig(kubeconfig, source, context)
        loader: Callable[..., None] = k8s_config.load_kube_config_from_dict
        target: dict[str, Any] = {"config_dict": kubeconfig}
    else:
        paths = _kubeconfig_paths(str(kubeconfig), origin)
        source = os.pathsep.join(paths)
        # The context is passed on explicitly: with several files the kubernetes library takes the
        # last current-context, kubectl (and this check) the first.
        context = check_kubeconfig(_merge_kubeconfigs(paths), source, context)
        loader = k8s_config.load_kube_config
        target = {"config_file": source}
    try:
        loader(**target, context=context, client_configuration=cfg, persist_config=False)
    except ConfigException as exc:
        raise ClusterError(f"kubeconfig {source} cannot be used: {exc}") from None
    except yaml.YAMLError as exc:
        raise ClusterError(f"kubeconfig {source} is not valid YAML: {_yaml_problem(exc)}") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ClusterError(f"kubeconfig {source} cannot be used: {type(exc).__name__}: {exc}") from None


def _default_kubeconfig(env: Mapping[str, str]) -> tuple[str, str]:
    if env.get("KUBECONFIG"):
        return env["KUBECONFIG"], "from KUBECONFIG"
    return DEFAULT_KUBECONFIG, "the default location"


def build_configuration(auth: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> Configuration:
    """A kubernetes Configuration from resolved options, in kubernetes.core's order.

    1. host plus credentials (api_key, username+password, client_cert+client_key): no kubeconfig;
    2. kubeconfig or context given (parameter or K8S_AUTH_*): that kubeconfig;
    3. running in a pod (KUBERNETES_SERVICE_HOST set): the service account;
    4. otherwise the kubeconfig from KUBECONFIG or ~/.kube/config (with only a host given,
       and none there, the host is used without credentials, as for ``kubectl proxy``).
    Explicit options then override what was loaded.
    """
    if not HAS_KUBERNETES:
        raise ClusterError("the kubernetes Python library is required (pip install kubernetes)")
    env = os.environ if environ is None else environ
    cfg = Configuration()
    if has_explicit_credentials(auth):
        pass
    elif auth.get("kubeconfig") is not None or auth.get("context"):
        kubeconfig = auth.get("kubeconfig")
        origin = "kubeconfig option or K8S_AUTH_KUBECONFIG"
        if kubeconfig is None:
            kubeconfig, origin = _default_kubeconfig(env)
        _load_kubeconfig(cfg, kubeconfig, auth.get("context"), origin)
    elif env.get(IN_CLUSTER_ENV):
        try:
            k8s_config.load_incluster_config(client_configuration=cfg)
        except ConfigException as exc:
            raise ClusterError(
                f"in-cluster configuration failed ({IN_CLUSTER_ENV} is set): {exc}; "
                "give kubeconfig or host and credentials instead"
            ) from None
    else:
        kubeconfig, origin = _default_kubeconfig(env)
        if any(os.path.isfile(_expand_path(p)) for p in kubeconfig.split(os.pathsep) if p):
            _load_kubeconfig(cfg, kubeconfig, None, origin)
        elif not auth.get("host"):
            raise ClusterError(
                f"no cluster configured: no kubeconfig at {kubeconfig} ({origin}), not running in a pod "
                f"({IN_CLUSTER_ENV} unset), and no host given; set kubeconfig (or K8S_AUTH_KUBECONFIG), "
                "or host with api_key or a client certificate"
            )
    _apply_overrides(cfg, auth)
    return cfg


def _check_file(option: str, path: str | None) -> None:
    if path and not os.path.isfile(path):
        raise ClusterError(f"{option} file not found: {path}")


def _apply_overrides(cfg: Configuration, auth: Mapping[str, Any]) -> None:
    host = auth.get("host")
    if host:
        host = str(host).strip().rstrip("/")
        cfg.host = host if "://" in host else f"https://{host}"
    if auth.get("api_key"):
        cfg.api_key = {"BearerToken": f"Bearer {auth['api_key']}"}
        cfg.refresh_api_key_hook = None
    elif auth.get("username") and auth.get("password"):
        cfg.api_key = {}
        cfg.refresh_api_key_hook = None
        cfg.username = auth["username"]
        cfg.password = auth["password"]
    if bool(auth.get("client_cert")) != bool(auth.get("client_key")):
        raise ClusterError("client_cert and client_key must be given together")
    for option, attribute in (("ca_cert", "ssl_ca_cert"), ("client_cert", "cert_file"), ("client_key", "key_file")):
        if auth.get(option):
            _check_file(option, auth[option])
            setattr(cfg, attribute, auth[option])
    if auth.get("validate_certs") is not None:
        cfg.verify_ssl = bool(auth["validate_certs"])
    if auth.get("proxy"):
        cfg.proxy = auth["proxy"]
    if auth.get("no_proxy"):
        cfg.no_proxy = auth["no_proxy"]
    # Our own loop retries (and counts) every request; urllib3 must not retry behind it.
    cfg.retries = False


def impersonation_headers(auth: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Impersonate-User and one Impersonate-Group header per group (the API server reads each)."""
    headers: list[tuple[str, str]] = []
    if auth.get("impersonate_user"):
        headers.append(("Impersonate-User", str(auth["impersonate_user"])))
    for group in auth.get("impersonate_groups") or []:
        headers.append(("Impersonate-Group", str(group)))
    return headers


# ---------------------------------------------------------------------------------------
# Error messages
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ApiTarget:
    """What a raw API path addresses."""

    group: str
    version: str
    resource: str
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None

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


def _object_ref(target: ApiTarget) -> str:
    what = f'{target.resource} "{target.name}"' if target.name else f'resource "{target.resource}"'
    if target.subresource:
        what += f" (subresource {target.subresource})"
    if target.namespace:
        what += f' in namespace "{target.namespace}"'
    return what


def describe_api_error(status: int, reason: str | None, body_text: str | None, verb: str, path: str) -> str:
    """One clear message for an HTTP error from the API server.

    ``verb`` is the HTTP method (GET, PATCH, ...) or an RBAC verb (list, get, ...).
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
        return (
            f"credentials rejected ({label}) on {request}: the token, client certificate or kubeconfig "
            "user is not accepted by the API server (expired or revoked?)"
        )
    if status == 403:
        if api_message and not _RBAC_DENIAL.search(api_message):
            # Admission (PodSecurity, quota, a webhook) denied it, not RBAC.
            return f"forbidden ({label}) on {request}{detail}"
        if target is None:
            return f"forbidden ({label}) on {request}{detail}"
        scope = f'in namespace "{target.namespace}"' if target.namespace else "at cluster scope"
        user = _DENIED_USER.search(api_message)
        to_user = f' to user "{user.group(1)}"' if user else ""
        return (
            f'forbidden: cannot {rbac} resource "{target.rbac_resource}" {scope}; '
            f'grant the verb "{rbac}" on "{target.rbac_resource}" (apiGroup "{target.group}"){to_user}'
        )
    if status == 404:
        if target is None:
            return f"not found ({label}) on {request}{detail}"
        if target.name is None:
            group = f"{target.group}/{target.version}" if target.group else target.version
            return f'not found: resource "{target.resource}" ({group}) is not served by this API server'
        return f"not found: {_object_ref(target)}"
    kinds = {
        409: "conflict",
        410: "gone",
        422: "invalid",
        429: "throttled by the API server",
    }
    if status in kinds:
        what = kinds[status]
    elif status >= 500:
        what = "API server error"
    else:
        what = "request failed"
    return f"{what} ({label}) on {request}{detail}"


def _safe_host(host: str) -> str:
    parts = urlsplit(host)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return f"{parts.scheme}://{netloc}" if parts.scheme else netloc or host


def _exception_chain(exc: BaseException) -> list[BaseException]:
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
    chain = _exception_chain(exc)
    return any(type(e).__name__ == "SSLCertVerificationError" for e in chain) or any(
        "CERTIFICATE_VERIFY_FAILED" in str(e) for e in chain
    )


def describe_connection_error(exc: BaseException, host: str, timeout: float | None = None) -> str:
    """One clear message for a transport failure (DNS, refused, timeout, TLS, proxy)."""
    where = _safe_host(host)
    server = urlsplit(where).hostname or where
    chain = _exception_chain(exc)
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


# ---------------------------------------------------------------------------------------
# Retries
# ---------------------------------------------------------------------------------------


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date), if any."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def backoff_delay(attempt: int, backoff: float, rand: Callable[[], float] = random.random) -> float:
    """Exponential backoff with jitter: between half and all of backoff * 2**attempt, capped."""
    ceiling = min(MAX_BACKOFF, backoff * (2**attempt))
    return ceiling / 2 + rand() * ceiling / 2


def retry_budget(status: int, retries: int) -> int:
    """Retries allowed for a status. A 429 is the server asking to come back later, not a failure,
    so it gets the budget client-go gives it (ten), unless retries are off."""
    return max(retries, THROTTLE_RETRIES) if status == 429 and retries else retries


def retry_delay(
    retry_after: str | None, attempt: int, backoff: float, rand: Callable[[], float] = random.random
) -> float:
    """The server's Retry-After (capped) plus jitter, so parallel workers do not return in lockstep;
    exponential backoff when the server names no time."""
    wait = parse_retry_after(retry_after)
    if wait is None:
        return backoff_delay(attempt, backoff)
    return min(wait, MAX_RETRY_AFTER) + rand() * backoff


def may_retry_status(method: str, status: int) -> bool:
    """Whether a response status may be retried for this method.

    GET, PATCH (JSON merge patch is idempotent: sending it twice gives the same object) and
    DELETE (a repeat finds the object gone) retry on every retryable status. POST (create)
    is retried only on 429 and 503, where the server did not act on it.
    """
    if status not in RETRY_STATUSES:
        return False
    if method == "POST":
        return status in NOT_PROCESSED_STATUSES
    return True


def may_retry_transport(method: str, exc: BaseException) -> bool:
    """Whether a transport failure may be retried.

    A certificate that fails verification fails again: never. Otherwise any failure for the
    idempotent methods; for POST only when no connection was made (refused, DNS, connect
    timeout), so that nothing was sent.
    """
    if is_tls_verification_error(exc):
        return False
    if method != "POST":
        return True
    names = {type(e).__name__ for e in _exception_chain(exc)}
    if "ReadTimeoutError" in names:
        return False
    return bool(names & {"NewConnectionError", "NameResolutionError", "ConnectTimeoutError", "ConnectionRefusedError"})


# ---------------------------------------------------------------------------------------
# The client
# ---------------------------------------------------------------------------------------


@dataclass
class _Response:
    status: int
    reason: str
    headers: Mapping[str, str]
    data: bytes


class KubeClient:
    """Raw API paths in, plain dicts out; retries bounded, errors as ClusterError."""

    def __init__(
        self,
        api_client: ApiClient,
        *,
        extra_headers: list[tuple[str, str]] | None = None,
        retries: int = 4,
        backoff: float = 0.5,
        timeout: float = 30,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.api_client = api_client
        self.configuration: Configuration = api_client.configuration
        self.host: str = self.configuration.host
        self.extra_headers = list(extra_headers or [])
        self.retries = max(0, int(retries))
        self.backoff = max(0.0, float(backoff))
        self.timeout = float(timeout)
        self.sleep = sleep
        self.request_count = 0
        self.write_count = 0

    # -- public API ----------------------------------------------------------------------

    def get(self, path: str, *, query: dict[str, Any] | None = None) -> dict[str, Any]:
        return self._json("GET", path, query=query)

    def list_items(
        self,
        path: str,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
    ) -> Iterator[dict[str, Any]]:
        """Every item of a collection, page by page (limit/continue), one dict at a time."""
        query: dict[str, Any] = {"limit": page_size}
        if label_selector:
            query["labelSelector"] = label_selector
        if field_selector:
            query["fieldSelector"] = field_selector
        token: str | None = None
        while True:
            page_query = dict(query, **({"continue": token} if token else {}))
            try:
                page = self._json("GET", path, query=page_query)
            except ClusterError as exc:
                if exc.status == 410 and token:
                    raise ClusterError(
                        f"the list of {urlsplit(path).path} expired while it was being read (410 Gone: the "
                        "continue token is too old, the cluster changed faster than the pages were read); run again",
                        410,
                    ) from None
                raise
            yield from page.get("items") or []
            token = (page.get("metadata") or {}).get("continue") or None
            if not token:
                return

    def patch_merge(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """JSON merge patch (RFC 7386), as ``kubectl label`` sends; a null value removes a key."""
        return self._json("PATCH", path, body=body, content_type="application/merge-patch+json")

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._json("POST", path, body=body, content_type="application/json")

    def delete(self, path: str, *, query: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """Delete; None when the object is already gone (404)."""
        try:
            return self._json("DELETE", path, query=query)
        except ClusterError as exc:
            if exc.status == 404:
                return None
            raise

    def read_text(self, path: str, *, query: dict[str, Any] | None = None) -> str:
        """A text response, such as ``/api/v1/namespaces/<ns>/pods/<name>/log``."""
        response = self._request("GET", path, query=query, accept="*/*")
        return response.data.decode("utf-8", errors="replace")

    # -- transport -----------------------------------------------------------------------

    def _json(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str | None = None,
    ) -> dict[str, Any]:
        response = self._request(method, path, query=query, body=body, content_type=content_type)
        if not response.data:
            return {}
        try:
            decoded = json.loads(response.data)
        except ValueError:
            raise ClusterError(
                f"{method} {urlsplit(path).path}: the API server at {_safe_host(self.host)} answered "
                f"{response.status} with a body that is not JSON",
                response.status,
            ) from None
        if not isinstance(decoded, dict):
            raise ClusterError(f"{method} {urlsplit(path).path}: expected a JSON object from the API server")
        return decoded

    def _headers(self, accept: str, content_type: str | None) -> urllib3.HTTPHeaderDict:
        headers = urllib3.HTTPHeaderDict({"Accept": accept, "User-Agent": USER_AGENT})
        if content_type:
            headers["Content-Type"] = content_type
        cfg = self.configuration
        # kubeconfig and in-cluster tokens live under "BearerToken" (older clients: "authorization");
        # reading them through the configuration runs its refresh hook (exec plugins, rotated tokens).
        token = cfg.get_api_key_with_prefix("BearerToken") or cfg.get_api_key_with_prefix("authorization")
        if token:
            headers["Authorization"] = token
        elif cfg.username and cfg.password:
            basic = cfg.get_basic_auth_token()
            if basic:
                headers["Authorization"] = basic
        for name, value in self.extra_headers:
            headers.add(name, value)
        return headers

    def _url(self, path: str, query: dict[str, Any] | None) -> str:
        url = self.host.rstrip("/") + "/" + path.lstrip("/")
        if query:
            pairs = {
                k: ("true" if v is True else "false" if v is False else v) for k, v in query.items() if v is not None
            }
            url += ("&" if "?" in url else "?") + urlencode(pairs, doseq=True)
        return url

    def _send_once(self, method: str, url: str, headers: Any, body: Any) -> _Response:
        self.request_count += 1
        if method in ("POST", "PUT", "PATCH", "DELETE"):
            self.write_count += 1
        try:
            with warnings.catch_warnings():
                if not self.configuration.verify_ssl:
                    warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)
                raw = self.api_client.rest_client.request(
                    method, url, headers=headers, body=body, _request_timeout=(self.timeout, self.timeout)
                )
        except ApiException as exc:
            # Clients before the pydantic regeneration raise on any status outside 2xx.
            if not exc.status:
                raise
            data = exc.body if isinstance(exc.body, bytes) else str(exc.body or "").encode()
            return _Response(int(exc.status), exc.reason or "", exc.headers or {}, data)
        try:
            data = raw.read() if getattr(raw, "data", None) is None else raw.data
        finally:
            release = getattr(getattr(raw, "response", None), "release_conn", None)
            if release is not None:
                release()
        if isinstance(data, str):  # older clients decode text bodies themselves
            data = data.encode("utf-8")
        return _Response(int(raw.status), raw.reason or "", raw.getheaders() or {}, data or b"")

    def _request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str | None = None,
        accept: str = "application/json",
    ) -> _Response:
        url = self._url(path, query)
        attempt = 0
        while True:
            try:
                response = self._send_once(method, url, self._headers(accept, content_type), body)
            except (urllib3.exceptions.HTTPError, ApiException, OSError) as exc:
                if attempt < self.retries and may_retry_transport(method, exc):
                    self.sleep(backoff_delay(attempt, self.backoff))
                    attempt += 1
                    continue
                self._fail_transport(exc, attempt)
            if response.status < 400:
                return response
            if attempt < retry_budget(response.status, self.retries) and may_retry_status(method, response.status):
                self.sleep(retry_delay(response.headers.get("Retry-After"), attempt, self.backoff))
                attempt += 1
                continue
            message = describe_api_error(
                response.status, response.reason, response.data.decode("utf-8", "replace"), method, path
            )
            if attempt and response.status in RETRY_STATUSES:
                message += f"; gave up after {attempt + 1} attempts"
            raise ClusterError(message, response.status)

    def _fail_transport(self, exc: BaseException, attempt: int) -> NoReturn:
        message = describe_connection_error(exc, self.host, self.timeout)
        if attempt:
            message += f"; gave up after {attempt + 1} attempts"
        raise ClusterError(message) from None


def client_from_params(
    params: Mapping[str, Any], *, retries: int = 4, backoff: float = 0.5, timeout: float = 30
) -> KubeClient:
    """A KubeClient from an Ansible module's params (or a CLI's dict) with AUTH_ARG_SPEC keys."""
    if not HAS_KUBERNETES:
        raise ClusterError("the kubernetes Python library is required (pip install kubernetes)")
    auth = resolve_auth_params(params)
    cfg = build_configuration(auth)
    return KubeClient(
        ApiClient(cfg),
        extra_headers=impersonation_headers(auth),
        retries=retries,
        backoff=backoff,
        timeout=timeout,
    )
