"""When and how long to wait before retrying a provider call (a pure decision).

Retryable: what the provider classified as retryable (network, timeout, 408, 409, 429 rate limit,
5xx, 529 overloaded), unless the server's ``x-should-retry`` says otherwise. Fatal errors (auth,
bad request, exhausted quota) are never retried. Backoff is exponential with jitter, capped; a
server's retry-after wins when it is not absurdly long. The random draw is passed in, so a
simulation with a seeded source stays deterministic.
"""

from __future__ import annotations

from loopctl.api import ApiError
from loopctl.driver.config import RetryConfig


def retry_delay(error: ApiError, attempt: int, config: RetryConfig, draw: float) -> float | None:
    """Seconds to wait before retry number ``attempt + 1``, or None to give up.

    ``attempt`` counts the retries already made (0 before the first); ``draw`` is in [0, 1).
    """
    retryable: bool = (
        error.should_retry if error.should_retry is not None else error.error.retryable
    )
    if not retryable or attempt >= config.max_retries:
        return None
    if error.retry_after is not None and 0 <= error.retry_after <= config.max_retry_after:
        return float(error.retry_after)
    delay: float = min(config.base_delay * (2**attempt), config.max_delay)
    return delay * (1 - config.jitter * draw)
