# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Connection options and the kubernetes library's configuration built from them.

The options, their aliases and their ``K8S_AUTH_*`` environment variables are those of
kubernetes.core, so one kubeconfig setting serves both collections. Nothing else in the
collection imports the kubernetes library's configuration code.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError

try:
    import yaml
    from kubernetes import config as k8s_config
    from kubernetes.client import Configuration
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
