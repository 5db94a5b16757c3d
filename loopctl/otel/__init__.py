"""OpenTelemetry GenAI spans for loopctl runs (``pip install 'loopctl[otel]'``).

==============  ==================================================================================
module          owns
==============  ==================================================================================
``spans``       ``GenAiSpans``: which span an event opens, annotates or ends, at given times;
                the mapping of events to GenAI semantic-convention attributes (content opt-in
                and scrubbing)
``observer``    ``OtelObserver``: the driver observer that feeds ``GenAiSpans`` as a run goes
==============  ==================================================================================

Part of the engine, beside the driver: it imports ``loopctl.observe``, ``loopctl.core`` and the
OpenTelemetry API, never ``loopctl_sim`` (whose ``loopctl-sim otel`` feeds the same
``GenAiSpans`` from a recorded trace). Importable only with the extra installed: without it the
import fails with an ``ImportError`` that says what to install.
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
