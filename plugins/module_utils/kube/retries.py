# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""When a request may be sent again, and how long to wait first."""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Callable

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import (
    exception_chain,
    is_tls_verification_error,
)

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})

# Statuses for which the API server has provably not acted on a request: throttled by
# priority-and-fairness or max-requests-inflight (429), or not served at all (503).
NOT_PROCESSED_STATUSES = frozenset({429, 503})
MAX_RETRY_AFTER = 30.0
THROTTLE_RETRIES = 10
MAX_BACKOFF = 30.0


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
    names = {type(e).__name__ for e in exception_chain(exc)}
    if "ReadTimeoutError" in names:
        return False
    return bool(names & {"NewConnectionError", "NameResolutionError", "ConnectTimeoutError", "ConnectionRefusedError"})
