# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Connection options and the kubernetes library's configuration built from them.

The options, their aliases and their ``K8S_AUTH_*`` environment variables are those of
kubernetes.core, so one kubeconfig setting serves both collections. Nothing else in the
collection imports the kubernetes library's configuration code.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import (
    ClusterError,
    CredentialError,
    OptionError,
    describe_auth_provider_failure,
    describe_exec_failure,
    describe_expired_oidc_token,
    describe_missing_provider_token,
    one_line,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.library import load as load_library

if TYPE_CHECKING:
    from kubernetes.client import Configuration

try:
    import urllib3
    import yaml

    # The library's loaders without the rest of it (kube/library.py): most of a short run's start.
    _LIBRARY = load_library()
    k8s_config = _LIBRARY["config"]
    Configuration = _LIBRARY["Configuration"]  # type: ignore[misc]  # noqa: F811
    ConfigException = _LIBRARY["ConfigException"]
except ImportError:
    HAS_KUBERNETES = False
    KUBERNETES_IMPORT_ERROR: str | None = traceback.format_exc()
else:
    HAS_KUBERNETES = True
    KUBERNETES_IMPORT_ERROR = None


# The headers urllib3.util.make_headers() builds for the proxy, as kubernetes.core's
# AUTH_PROXY_HEADERS_SPEC names them.
PROXY_HEADERS_SPEC: dict[str, dict[str, Any]] = {
    "proxy_basic_auth": {"type": "str", "no_log": True},
    "basic_auth": {"type": "str", "no_log": True},
    "user_agent": {"type": "str"},
}
PROXY_HEADERS_ENV_VARS: dict[str, str] = {key: f"K8S_AUTH_PROXY_HEADERS_{key.upper()}" for key in PROXY_HEADERS_SPEC}

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
    "proxy_headers": {"type": "dict", "options": PROXY_HEADERS_SPEC},
    "persist_config": {"type": "bool"},
    "impersonate_user": {"type": "str"},
    "impersonate_groups": {"type": "list", "elements": "str"},
}

# Option -> environment variables, first match wins. kubernetes.core reads K8S_AUTH_<OPTION>
# and then K8S_AUTH_<name in the kubernetes client>; the latter are the documented ones.
# proxy_headers has one variable per header: PROXY_HEADERS_ENV_VARS.
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
    "persist_config": ("K8S_AUTH_PERSIST_CONFIG",),
    "impersonate_user": ("K8S_AUTH_IMPERSONATE_USER",),
    "impersonate_groups": ("K8S_AUTH_IMPERSONATE_GROUPS",),
}
DEFAULT_KUBECONFIG = "~/.kube/config"
IN_CLUSTER_ENV = "KUBERNETES_SERVICE_HOST"
_TRUE = frozenset({"1", "true", "yes", "on", "y", "t"})
_FALSE = frozenset({"0", "false", "no", "off", "n", "f"})


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


def resolve_proxy_headers(value: Any, env: Mapping[str, str]) -> dict[str, str] | None:
    """Each proxy header from the proxy_headers option, else its K8S_AUTH_PROXY_HEADERS_* variable."""
    known = ", ".join(PROXY_HEADERS_SPEC)
    if value is not None and not isinstance(value, Mapping):
        raise OptionError(f"proxy_headers must be a dict with any of {known}")
    given = dict(value or {})
    unknown = sorted(str(key) for key in given if key not in PROXY_HEADERS_SPEC)
    if unknown:
        raise OptionError(f"proxy_headers: unknown key(s) {', '.join(unknown)}; known: {known}")
    headers: dict[str, str] = {}
    for key, var in PROXY_HEADERS_ENV_VARS.items():
        header, source = given.get(key), f"proxy_headers.{key}"
        if header is None and env.get(var):
            header, source = env[var], var
        if header is None:
            continue
        if key.endswith("basic_auth") and ":" not in str(header):
            raise OptionError(f"{source} must be username:password (the value is not shown)")
        headers[key] = str(header)
    return headers or None


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
        if option == "proxy_headers":
            resolved[option] = resolve_proxy_headers(value, env)
            continue
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


def environment_secret_values(environ: Mapping[str, str] | None = None) -> set[str]:
    """The values of the K8S_AUTH_* variables that stand in for a no_log option (api_key, password,
    the proxy's basic auth), for a module's ``no_log_values``."""
    env = os.environ if environ is None else environ
    names = [var for option, spec in AUTH_ARG_SPEC.items() if spec.get("no_log") for var in AUTH_ENV_VARS[option]]
    names += [PROXY_HEADERS_ENV_VARS[key] for key, spec in PROXY_HEADERS_SPEC.items() if spec.get("no_log")]
    return {env[name] for name in names if env.get(name)}


# Fields of a kubeconfig user's exec section that describe the plugin and carry no secret; a
# failure message names the command, so it must not be masked.
_EXEC_DESCRIPTION = frozenset({"command", "apiVersion", "installHint", "interactiveMode", "provideClusterInfo"})


def kubeconfig_secret_values(kubeconfig: Any) -> set[str]:
    """The string values of an in-memory kubeconfig's users, for a module's ``no_log_values``.

    Every value counts but the users' names and the exec plugin's description (its command,
    apiVersion and install hint); the plugin's arguments and environment count.
    """
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

    if not isinstance(kubeconfig, dict) or not isinstance(kubeconfig.get("users"), list):
        return found
    for entry in kubeconfig["users"]:
        user = entry.get("user") if isinstance(entry, dict) else entry
        if isinstance(user, dict) and isinstance(user.get("exec"), dict):
            walk({key: value for key, value in user.items() if key != "exec"})
            walk({key: value for key, value in user["exec"].items() if key not in _EXEC_DESCRIPTION})
        else:
            walk(user)
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


def context_user(data: Mapping[str, Any], context: str) -> tuple[str, dict[str, Any]]:
    """The name and the ``user`` mapping of the kubeconfig user a (checked) context names."""
    entry = next(c for c in data["contexts"] if isinstance(c, dict) and c.get("name") == context)
    name = str((entry.get("context") or {}).get("user") or "")
    for user in data.get("users") or []:
        if isinstance(user, dict) and user.get("name") == name and isinstance(user.get("user"), dict):
            return name, user["user"]
    return name, {}


def _jwt_expiry(token: str) -> float | None:
    """The ``exp`` claim of a JWT, or None when the token is not a JWT that has one."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, TypeError):
        return None
    expiry = claims.get("exp") if isinstance(claims, dict) else None
    return float(expiry) if isinstance(expiry, int | float) and not isinstance(expiry, bool) else None


def bearer_token(cfg: Configuration) -> str | None:
    """The bearer token a configuration holds (without its prefix), if any."""
    value = cfg.api_key.get("BearerToken") or cfg.api_key.get("authorization") or ""
    scheme, _space, token = str(value).partition(" ")
    return token if scheme.lower() == "bearer" and token else None


def has_credentials(cfg: Configuration) -> bool:
    """Whether a configuration holds a token, a basic-auth header, a password or a client certificate."""
    return bool(cfg.api_key.get("BearerToken") or cfg.api_key.get("authorization") or cfg.cert_file or cfg.password)


def credential_failure(
    user_name: str,
    user: Mapping[str, Any],
    logged: list[str],
    loaded: bool,
    token: str | None,
    now: float,
) -> str | None:
    """Why the kubeconfig user's exec plugin or auth-provider gave no usable credentials, if it did not.

    ``logged`` is what the kubernetes library logged while it ran them, ``loaded`` whether the
    configuration holds any credentials, ``token`` its bearer token.
    """
    plugin = user.get("exec")
    # The library tries an auth-provider, then a token, and only then the exec plugin.
    shadowed = {"auth-provider", "token", "tokenFile"} & set(user)
    if isinstance(plugin, Mapping) and not shadowed and (logged or not loaded):
        command = str(plugin.get("command") or "")
        hint = plugin.get("installHint")
        return describe_exec_failure(command, user_name, logged[-1] if logged else None, hint)
    provider = user.get("auth-provider")
    if isinstance(provider, Mapping) and provider.get("name"):
        if not loaded:
            return describe_missing_provider_token(str(provider["name"]), user_name)
        expiry = _jwt_expiry(token) if provider.get("name") == "oidc" and token else None
        if expiry is not None and expiry <= now:
            issuer = (provider.get("config") or {}).get("idp-issuer-url")
            return describe_expired_oidc_token(user_name, issuer)
    return None


class _LibraryErrors(logging.Handler):
    """What the kubernetes library logs at ERROR in one thread.

    It logs a failed exec credential plugin and carries on without credentials; the request
    would then go out anonymous and be answered as system:anonymous.
    """

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.thread = threading.get_ident()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread:
            self.messages.append(record.getMessage())


@contextmanager
def library_errors() -> Iterator[list[str]]:
    """The messages the kubernetes library logs at ERROR inside the block, kept out of stderr."""
    handler = _LibraryErrors()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield handler.messages
    finally:
        root.removeHandler(handler)


def _guard_refresh(cfg: Configuration, describe: Callable[[list[str]], str | None]) -> None:
    """Make the configuration's token refresh raise when an exec plugin fails while it runs.

    The library runs the plugin again in this hook when the token expires, and on failure
    keeps the expired token; the hook also puts itself back after each call.
    """
    hook = cfg.refresh_api_key_hook
    if hook is None:
        return

    def refresh(configuration: Configuration) -> None:
        with library_errors() as logged:
            hook(configuration)
        configuration.refresh_api_key_hook = refresh
        failure = describe(logged)
        if failure:
            raise CredentialError(failure)

    cfg.refresh_api_key_hook = refresh


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


def _load_kubeconfig(
    cfg: Configuration, kubeconfig: Any, context: str | None, origin: str, persist_config: bool = False
) -> None:
    if isinstance(kubeconfig, dict):
        source = "(given as a dict)"
        data: dict[str, Any] = kubeconfig
        loader: Callable[..., None] = k8s_config.load_kube_config_from_dict
        target: dict[str, Any] = {"config_dict": kubeconfig}
    else:
        paths = _kubeconfig_paths(str(kubeconfig), origin)
        source = os.pathsep.join(paths)
        data = _merge_kubeconfigs(paths)
        loader = k8s_config.load_kube_config
        target = {"config_file": source}
    # The context is passed on explicitly: with several files the kubernetes library takes the
    # last current-context, kubectl (and this check) the first.
    context = check_kubeconfig(data, source, context)
    user_name, user = context_user(data, context)
    provider = user.get("auth-provider") if isinstance(user.get("auth-provider"), dict) else None
    try:
        # persist_config: the library writes refreshed auth-provider tokens back to the file.
        with library_errors() as logged:
            loader(**target, context=context, client_configuration=cfg, persist_config=persist_config)
    except ConfigException as exc:
        raise ClusterError(f"kubeconfig {source} cannot be used: {one_line(str(exc))}") from None
    except yaml.YAMLError as exc:
        raise ClusterError(f"kubeconfig {source} is not valid YAML: {_yaml_problem(exc)}") from None
    except Exception as exc:
        # An auth-provider's refresh reaches out to its issuer and raises whatever the HTTP and
        # OAuth libraries raise: that is the credentials failing, not the kubeconfig.
        if provider is not None:
            raise CredentialError(describe_auth_provider_failure(provider, user_name, exc)) from None
        if isinstance(exc, (OSError, ValueError, KeyError, TypeError)):
            raise ClusterError(f"kubeconfig {source} cannot be used: {type(exc).__name__}: {exc}") from None
        raise

    def failure(messages: list[str]) -> str | None:
        return credential_failure(user_name, user, messages, has_credentials(cfg), bearer_token(cfg), time.time())

    found = failure(logged)
    if found:
        raise CredentialError(found)
    # Later, only a plugin that fails when it runs again is news: an OIDC token that expires in
    # the middle of a run was never sent to the issuer (the library does not refresh it then).
    _guard_refresh(cfg, lambda messages: failure(messages) if messages else None)


def _default_kubeconfig(env: Mapping[str, str]) -> tuple[str, str]:
    if env.get("KUBECONFIG"):
        return env["KUBECONFIG"], "from KUBECONFIG"
    return DEFAULT_KUBECONFIG, "the default location"


def _in_cluster_failure(cfg: Configuration) -> str | None:
    """Load the pod's service account into the configuration; why not, if it cannot be loaded."""
    try:
        k8s_config.load_incluster_config(client_configuration=cfg)
    except ConfigException as exc:
        return one_line(str(exc)).rstrip(".")
    return None


def _load_default_kubeconfig(
    cfg: Configuration, auth: Mapping[str, Any], env: Mapping[str, str], in_cluster_failure: str | None
) -> None:
    kubeconfig, origin = _default_kubeconfig(env)
    if any(os.path.isfile(_expand_path(p)) for p in kubeconfig.split(os.pathsep) if p):
        _load_kubeconfig(cfg, kubeconfig, None, origin, bool(auth.get("persist_config")))
        return
    if auth.get("host"):
        return
    pod = (
        f"the in-cluster configuration failed ({IN_CLUSTER_ENV} is set: {in_cluster_failure})"
        if in_cluster_failure
        else f"not running in a pod ({IN_CLUSTER_ENV} unset)"
    )
    raise ClusterError(
        f"no cluster configured: no kubeconfig at {kubeconfig} ({origin}), {pod}, and no host given; "
        "set kubeconfig (or K8S_AUTH_KUBECONFIG), or host with api_key or a client certificate"
    )


def build_configuration(auth: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> Configuration:
    """A kubernetes Configuration from resolved options, in kubernetes.core's order.

    1. host plus credentials (api_key, username+password, client_cert+client_key): no kubeconfig;
    2. kubeconfig or context given (parameter or K8S_AUTH_*): that kubeconfig;
    3. running in a pod (KUBERNETES_SERVICE_HOST set): the service account, and when that cannot
       be loaded (no token mounted), what 4 finds;
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
        _load_kubeconfig(cfg, kubeconfig, auth.get("context"), origin, bool(auth.get("persist_config")))
    elif env.get(IN_CLUSTER_ENV):
        failure = _in_cluster_failure(cfg)
        if failure:
            _load_default_kubeconfig(cfg, auth, env, failure)
    else:
        _load_default_kubeconfig(cfg, auth, env, None)
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
    if auth.get("proxy_headers"):
        # Sent to the proxy only (on CONNECT for https), as kubernetes.core does.
        cfg.proxy_headers = urllib3.util.make_headers(**auth["proxy_headers"])
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
