# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The parts of the kubernetes library the collection uses, imported without the rest of it.

The collection uses the library's kubeconfig and in-cluster loaders (``kubernetes.config``), its
``Configuration`` and its REST transport (``kubernetes.client.rest``). Imported the usual way,
they run ``kubernetes/__init__.py`` and ``kubernetes/client/__init__.py`` first, which import the
dynamic client, watch, stream, the informer and the generated API client with its models'
machinery (pydantic, or every model in older releases); and the kubeconfig loader imports
requests and the OAuth libraries at its top for the one case that needs them, refreshing an
OIDC token. That is most of a short module run's time and about 20 MB before the first request.

Here those packages are registered without running their code (``deferred``): their submodules
import as usual, and the first attribute asked of one that it lacks runs its code, so whatever
does need the rest of the library (an OIDC refresh, another library in the same process) still
gets all of it. A library already imported in full is used as it is.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

_COMPLETING = threading.RLock()


def deferred(name: str, attributes: Callable[[], dict[str, Any]] | None = None) -> ModuleType:
    """The module ``name`` in ``sys.modules`` without its code run (its parent must be imported or
    deferred); ``attributes()`` are set on it when it is registered here. Its code runs at the first
    attribute asked of it that it lacks. A module already imported is returned as it is.

    Raises ImportError when the module is not installed.
    """
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ImportError(f"No module named {name!r}", name=name)
    loader = spec.loader
    module = importlib.util.module_from_spec(spec)

    def complete(attribute: str) -> Any:
        with _COMPLETING:
            if module.__dict__.get("__getattr__") is complete:
                del module.__dict__["__getattr__"]
                loader.exec_module(module)
        return getattr(module, attribute)

    module.__dict__["__getattr__"] = complete
    sys.modules[name] = module
    parent, _dot, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)
    if attributes is not None:
        module.__dict__.update(attributes())
    return module


def _forward(module: str, name: str) -> Callable[..., Any]:
    """A stand-in for the class ``module.name`` that imports it when it is first called."""

    def construct(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    construct.__name__ = construct.__qualname__ = name
    construct.stands_in_for = f"{module}.{name}"  # type: ignore[attr-defined]
    return construct


def _withdraw(module: ModuleType) -> None:
    """Take the stand-ins off a deferred module: what imports from it later gets the real classes
    (and runs its code)."""
    for key, value in list(module.__dict__.items()):
        if getattr(value, "stands_in_for", None):
            del module.__dict__[key]


def _client_attributes() -> dict[str, Any]:
    # What kubernetes.config imports from kubernetes.client: the configuration, and ApiClient, which
    # the kubeconfig loader builds only to ask an OIDC issuer for its discovery document.
    configuration = importlib.import_module("kubernetes.client.configuration")
    return {
        "Configuration": configuration.Configuration,
        "ApiClient": _forward("kubernetes.client.api_client", "ApiClient"),
    }


def _oauth_attributes() -> dict[str, Any]:
    return {"OAuth2Session": _forward("requests_oauthlib.oauth2_session", "OAuth2Session")}


def load() -> dict[str, Any]:
    """The library's modules and classes the collection uses, by name."""
    deferred("kubernetes")
    client = deferred("kubernetes.client", _client_attributes)
    deferred("oauthlib")
    deferred("oauthlib.oauth2")
    oauth = deferred("requests_oauthlib", _oauth_attributes)
    config = importlib.import_module("kubernetes.config")
    # The stand-ins served the loaders' own imports; they keep them.
    _withdraw(client)
    _withdraw(oauth)
    return {
        "config": config,
        "Configuration": importlib.import_module("kubernetes.client.configuration").Configuration,
        "RESTClientObject": importlib.import_module("kubernetes.client.rest").RESTClientObject,
        "ApiException": importlib.import_module("kubernetes.client.exceptions").ApiException,
        "ConfigException": importlib.import_module("kubernetes.config.config_exception").ConfigException,
    }
