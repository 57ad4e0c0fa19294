# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every module that talks to the API server shares: the connection options, secrets of
an inline kubeconfig kept out of output, the library check and one client."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient, client_from_params
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.config import (
    AUTH_ARG_SPEC,
    HAS_KUBERNETES,
    KUBERNETES_IMPORT_ERROR,
    environment_secret_values,
    kubeconfig_secret_values,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import KubegpuError


def with_connection_options(options: dict[str, Any]) -> dict[str, Any]:
    """A module's own options plus the connection options of kubernetes.core."""
    spec = copy.deepcopy(AUTH_ARG_SPEC)
    spec.update(options)
    return spec


def api_module(argument_spec: dict[str, Any], **kwargs: Any) -> AnsibleModule:
    """An AnsibleModule with check mode that never prints the credentials of an inline kubeconfig,
    nor those given through K8S_AUTH_* variables."""
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True, **kwargs)
    kubeconfig = module.params.get("kubeconfig")
    if isinstance(kubeconfig, dict):
        module.no_log_values.update(kubeconfig_secret_values(kubeconfig))
    module.no_log_values.update(environment_secret_values())
    return module


def module_client(module: AnsibleModule) -> KubeClient:
    """The API client for the module's connection options."""
    if not HAS_KUBERNETES:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=KUBERNETES_IMPORT_ERROR)
    return client_from_params(module.params)


@contextmanager
def errors_fail(module: AnsibleModule) -> Iterator[None]:
    """The one place where an error of the collection becomes the module's failure."""
    try:
        yield
    except KubegpuError as exc:
        module.fail_json(msg=exc.message, status=exc.status)
