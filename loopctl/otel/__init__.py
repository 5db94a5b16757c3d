"""OpenTelemetry GenAI spans for loopctl runs (``pip install 'loopctl[otel]'``).

``spans`` (``GenAiSpans``: which span an event opens, annotates or ends) and ``observer``
(``OtelObserver``, which feeds it as a run goes; ``loopctl-sim otel`` feeds it from a trace).
Without the extra installed, the import fails with an ``ImportError`` that says what to install.
"""

try:
    import opentelemetry.trace  # noqa: F401  (the API; the extra also brings the SDK)
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(
        "loopctl.otel needs OpenTelemetry: pip install 'loopctl[otel]' "
        "(opentelemetry-api and opentelemetry-sdk)"
    ) from exc

from loopctl.otel.observer import INSTRUMENTATION, OtelObserver
from loopctl.otel.spans import CAPTURE_ENV, GenAiSpans, scrub_content
from loopctl.secrets import REDACTED

__all__ = [
    "CAPTURE_ENV",
    "INSTRUMENTATION",
    "REDACTED",
    "GenAiSpans",
    "OtelObserver",
    "scrub_content",
]
