"""How the answer of the Eviction API is worded: a PodDisruptionBudget's refusal (429) is the budget's,
named where the API server names it; a 429 of the API server's throttling stays a throttle.

The bodies are the API server's own, from kubernetes/kubernetes at commit
01aa0f3f6052c9866dcb69054d8924fa8c96e3cb, pkg/registry/core/pod/storage/eviction.go
(checkAndDecrement, createTooManyRequestsError: message, DisruptionBudget cause), and at commit
04791b4906602ffda5ccf9bc4c84d3329f1d7080, staging/src/k8s.io/apiserver/pkg/server/filters/maxinflight.go
(tooManyRequests: a plain-text body).
"""

from __future__ import annotations

import json

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import budget_named, describe_api_error

EVICTION = "/api/v1/namespaces/serve/pods/llm-0/eviction"
REFUSED = "Cannot evict pod as it would violate the pod's disruption budget."


def status_body(message: str, causes: list[str]) -> str:
    details = {"causes": [{"reason": "DisruptionBudget", "message": m} for m in causes]} if causes else {}
    return json.dumps(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": "TooManyRequests",
            "details": details,
            "code": 429,
        }
    )


NO_DISRUPTION = status_body(REFUSED, ["The disruption budget llm needs 2 healthy pods and has 2 currently"])
NOT_PROCESSED = status_body(REFUSED, ["The disruption budget llm is still being processed by the server."])
# Releases before the cause was added answer with the message alone.
MESSAGE_ONLY = status_body(REFUSED, [])
THROTTLED = "Too many requests, please try again later.\n"


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (NO_DISRUPTION, "The disruption budget llm needs 2 healthy pods and has 2 currently"),
        (NOT_PROCESSED, "The disruption budget llm is still being processed by the server."),
    ],
)
def test_a_budgets_refusal_names_the_budget_the_api_server_names(body: str, words: str) -> None:
    said = describe_api_error(429, "Too Many Requests", body, "POST", EVICTION)
    assert said == f'refused by PodDisruptionBudget "llm" (429 Too Many Requests) on POST {EVICTION}: {words}'
    assert "throttl" not in said
    assert budget_named(said) == "llm"


def test_a_refusal_that_names_no_budget_is_still_the_pods_budgets() -> None:
    said = describe_api_error(429, "Too Many Requests", MESSAGE_ONLY, "POST", EVICTION)
    assert said == f"refused by the pod's PodDisruptionBudget (429 Too Many Requests) on POST {EVICTION}: {REFUSED}"
    assert budget_named(said) is None


def test_a_throttled_eviction_is_a_throttle() -> None:
    said = describe_api_error(429, "Too Many Requests", THROTTLED, "POST", EVICTION)
    assert said.startswith(f"throttled by the API server (429 Too Many Requests) on POST {EVICTION}")
    assert "budget" not in said.lower()


def test_a_429_elsewhere_stays_a_throttle() -> None:
    said = describe_api_error(429, "Too Many Requests", THROTTLED, "PATCH", "/api/v1/nodes/gpu-1")
    assert said.startswith("throttled by the API server (429 Too Many Requests) on PATCH /api/v1/nodes/gpu-1")
    # A budget's words on another path are no eviction's refusal.
    assert describe_api_error(429, None, NO_DISRUPTION, "GET", "/api/v1/pods").startswith("throttled by the API")
