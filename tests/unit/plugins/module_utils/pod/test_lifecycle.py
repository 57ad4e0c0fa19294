import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.pod import lifecycle

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "tensorflow-mnist"},
    "spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 1}}}]},
}


def test_checked_definition_sets_namespace():
    checked = lifecycle.checked_definition(POD, "gpu-samples")
    assert checked["metadata"]["namespace"] == "gpu-samples"
    assert "namespace" not in POD["metadata"]
    assert lifecycle.checked_definition(POD, None)["metadata"]["namespace"] == "default"


@pytest.mark.parametrize(
    "definition, problem",
    [
        ([], "must be a mapping"),
        ({**POD, "kind": "Deployment"}, "kind Pod"),
        ({**POD, "metadata": {}}, "metadata.name is required"),
        ({**POD, "spec": None}, "spec is required"),
        ({**POD, "metadata": {"name": "x", "namespace": "a"}}, "differs from namespace 'b'"),
    ],
)
def test_checked_definition_rejects(definition, problem):
    with pytest.raises(lifecycle.PodDefinitionError, match=problem):
        lifecycle.checked_definition(definition, "b")


def test_digest_ignores_key_order_and_plan():
    digest = lifecycle.manifest_digest(POD)
    reordered = {"spec": POD["spec"], "metadata": POD["metadata"], "kind": "Pod", "apiVersion": "v1"}
    assert lifecycle.manifest_digest(reordered) == digest
    existing = lifecycle.with_digest(POD, digest)
    assert existing["metadata"]["annotations"][lifecycle.DIGEST_ANNOTATION] == digest
    assert lifecycle.plan_present(None, digest, recreate=False) == "create"
    assert lifecycle.plan_present(existing, digest, recreate=False) == "unchanged"
    assert lifecycle.plan_present(existing, "other", recreate=False) == "conflict"
    assert lifecycle.plan_present(existing, "other", recreate=True) == "recreate"


def test_timeout_message_names_scheduler_reason():
    pending = {
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/9 nodes are available: 9 Insufficient nvidia.com/gpu.",
                }
            ],
        },
        "spec": {},
    }
    summary = lifecycle.pod_summary(pending)
    assert not lifecycle.is_settled(summary)
    message = lifecycle.timeout_message("p", "ns", summary, 30)
    assert message == "pod ns/p was not scheduled within 30s: 0/9 nodes are available: 9 Insufficient nvidia.com/gpu."
    running = {
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        "spec": {"nodeName": "n1"},
    }
    assert lifecycle.is_settled(lifecycle.pod_summary(running))
    assert lifecycle.pod_summary(running)["node"] == "n1"


def test_wait_for_uses_the_clock():
    now = [0.0]
    values = iter([1, 2, 3, 4, 5])
    value, done = lifecycle.wait_for(
        lambda: next(values),
        lambda v: v == 3,
        timeout=10,
        clock=lambda: now[0],
        sleep=lambda s: now.__setitem__(0, now[0] + s),
    )
    assert (value, done) == (3, True)
    value, done = lifecycle.wait_for(
        lambda: 0,
        lambda v: False,
        timeout=2,
        interval=1,
        clock=lambda: now[0],
        sleep=lambda s: now.__setitem__(0, now[0] + s),
    )
    assert done is False


class FakeClient:
    def __init__(self, failures):
        self.failures = list(failures)
        self.created = []

    def create(self, path, body):
        if self.failures:
            raise self.failures.pop(0)
        self.created.append((path, body))


def test_create_pod_waits_for_a_new_namespaces_service_account(monkeypatch):
    monkeypatch.setattr(lifecycle.time, "sleep", lambda seconds: None)
    pending = lifecycle.ClusterError(
        'pods "p" is forbidden: error looking up service account ns/default: serviceaccount "default" not found', 403
    )
    client = FakeClient([pending, pending])
    lifecycle.create_pod(client, "ns", {"kind": "Pod"}, timeout=30)
    assert client.created == [("/api/v1/namespaces/ns/pods", {"kind": "Pod"})]

    denied = lifecycle.ClusterError('forbidden: cannot create resource "pods"', 403)
    with pytest.raises(lifecycle.ClusterError, match="cannot create"):
        lifecycle.create_pod(FakeClient([denied]), "ns", {"kind": "Pod"}, timeout=30)
