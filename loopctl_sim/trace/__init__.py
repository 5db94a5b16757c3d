"""The trace format: records, their JSON Schema, the writer, the streaming reader, the feed
codec, secret scrubbing, and the recorders that write a run as it happens.

Everything above this package reads and writes traces only through it. It may import ``loopctl``
and nothing else of ``loopctl_sim``; its modules import from each other's modules, never from the
package, so the package imports in one order. ``records`` owns the format; ``feeds`` the feed
codec; ``scrub`` secret scrubbing; ``writer`` and ``reader``; ``files`` plain, gzip and stdin;
``requests`` the model request as recorded; ``recorder`` ``TraceRecorder`` and
``RecordingMachine``.
"""

from loopctl.secrets import REDACTED
from loopctl_sim.trace.feeds import FeedCodecError, decode_feed, encode_feed
from loopctl_sim.trace.files import STDIN, is_gzip_name, lines_of, open_for_reading
from loopctl_sim.trace.reader import TraceReader, read_trace
from loopctl_sim.trace.recorder import RecordingMachine, TraceRecorder, end_outcome
from loopctl_sim.trace.records import (
    BrainSummary,
    ContinuationError,
    EndRecord,
    FeedRecord,
    HeaderRecord,
    IoRecord,
    Record,
    RunError,
    StepRecord,
    TraceFormatError,
    read_record,
    record_json,
    trace_json_schema,
)
from loopctl_sim.trace.scrub import (
    Scrubber,
    default_scrubber,
    scrub,
    scrub_text,
    without_fingerprints,
)
from loopctl_sim.trace.writer import TraceWriteError, TraceWriter

__all__ = [
    "REDACTED",
    "STDIN",
    "BrainSummary",
    "ContinuationError",
    "EndRecord",
    "FeedCodecError",
    "FeedRecord",
    "HeaderRecord",
    "IoRecord",
    "Record",
    "RecordingMachine",
    "RunError",
    "Scrubber",
    "StepRecord",
    "TraceFormatError",
    "TraceReader",
    "TraceRecorder",
    "TraceWriteError",
    "TraceWriter",
    "decode_feed",
    "default_scrubber",
    "encode_feed",
    "end_outcome",
    "is_gzip_name",
    "lines_of",
    "open_for_reading",
    "read_record",
    "read_trace",
    "record_json",
    "scrub",
    "scrub_text",
    "trace_json_schema",
    "without_fingerprints",
]
