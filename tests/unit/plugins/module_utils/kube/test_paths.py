import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError, error_context
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.paths import api_path, collection_paths


@pytest.mark.parametrize(
    "args, kwargs, path",
    [
        (("v1", "nodes"), {}, "/api/v1/nodes"),
        (("v1", "nodes", "gpu-1"), {}, "/api/v1/nodes/gpu-1"),
        (("v1", "pods"), {"namespace": "ml"}, "/api/v1/namespaces/ml/pods"),
        (("v1", "pods", "p"), {"namespace": "ml", "subresource": "log"}, "/api/v1/namespaces/ml/pods/p/log"),
        (("apps/v1", "daemonsets"), {"namespace": "gpu-operator"}, "/apis/apps/v1/namespaces/gpu-operator/daemonsets"),
        (("v1", "namespaces", "team a"), {}, "/api/v1/namespaces/team%20a"),
        (("v1", "nodes", "a/b?c"), {}, "/api/v1/nodes/a%2Fb%3Fc"),
    ],
)
def test_every_name_is_quoted_into_its_place(args, kwargs, path):
    assert api_path(*args, **kwargs) == path


def test_collection_paths_cover_all_namespaces_or_each_given_one():
    assert collection_paths("apps/v1", "daemonsets", None) == ["/apis/apps/v1/daemonsets"]
    assert collection_paths("v1", "pods", ["a", "b/c"]) == [
        "/api/v1/namespaces/a/pods",
        "/api/v1/namespaces/b%2Fc/pods",
    ]


def test_error_context_names_the_step_and_keeps_the_status():
    with pytest.raises(ClusterError) as raised, error_context("cannot list nodes"):
        raise ClusterError('forbidden: cannot list resource "nodes"', 403)
    assert raised.value.message == 'cannot list nodes: forbidden: cannot list resource "nodes"'
    assert raised.value.status == 403
