# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""API paths: every path the collection requests is built here, and every name in it quoted."""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import quote


def api_path(
    api_version: str,
    resource: str,
    name: str | None = None,
    *,
    namespace: str | None = None,
    subresource: str | None = None,
) -> str:
    """The path of a collection (no name) or of one object, in a namespace or at cluster scope.

    ``api_version`` is as in a manifest: ``v1`` for the core group, ``apps/v1`` for the others.
    """
    parts = [f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"]
    if namespace is not None:
        parts += ["namespaces", quote(namespace, safe="")]
    parts.append(resource)
    if name is not None:
        parts.append(quote(name, safe=""))
    if subresource:
        parts.append(subresource)
    return "/".join(parts)


def collection_paths(api_version: str, resource: str, namespaces: Iterable[str] | None) -> list[str]:
    """Paths listing a resource in every namespace (None or empty), or in each of the given ones."""
    if not namespaces:
        return [api_path(api_version, resource)]
    return [api_path(api_version, resource, namespace=namespace) for namespace in namespaces]
