"""A campaign's summary (``CampaignSummary``) and its state file (``--state campaign.json``): the
chunks of seeds done and what they found, so a stopped campaign goes on where it was without
running a finished chunk again or losing a failure.

The file is JSON Lines, only ever appended to (a million seeds are ten thousand chunks: a
rewritten document would be written ten thousand times)::

    {"format": "loopctl-fuzz-state", "version": 1, "campaign": {...}, "chunk_size": 100, ...}
    {"chunk": 0, "seeds": [0, 99], "summary": {...}}

A chunk's line is fsynced after its failure files are on disk; a torn last line is dropped
(that chunk runs again). The first line names the campaign: another campaign's state is refused
with what differs, and the chunk size is the state's own (the chunks' indexes depend on it). A
running campaign holds a lock on the file (``flock``), so a second client is refused.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

from pydantic import TypeAdapter, ValidationError

import loopctl
from loopctl_sim.errors import SimError
from loopctl_sim.fuzz.case import ALL_FAULTS, FuzzConfig
from loopctl_sim.fuzz.checks import CaseResult
from loopctl_sim.fuzz.executors import Chunk
from loopctl_sim.trace import scrub
from loopctl_sim.trace.files import write_atomically

# --- the summary ---------------------------------------------------------------------------


@dataclass
class CampaignSummary:
    """A whole campaign in counts and its failing seeds: sums and a sorted list, so it does not
    depend on how the seeds were chunked, where they ran or in what order they finished."""

    seeds: int = 0
    runs: int = 0
    steps: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    enabled: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    failures: list[CaseResult] = field(default_factory=list)
    #: the exploring model's moves (an agent's campaign)
    moves: Counter[str] = field(default_factory=Counter)
    #: what some seeds could not check (each note, with the number of seeds it applies to)
    notes: Counter[str] = field(default_factory=Counter)
    #: the faults the seeds scheduled, by kind (``faults``: those that struck)
    scheduled: Counter[str] = field(default_factory=Counter)

    @property
    def ok(self) -> bool:
        return not self.failures

    def add(self, r: CaseResult) -> None:
        self.seeds += 1
        self.runs += r.runs
        self.steps += r.steps
        self.faults.update(r.faults)
        self.enabled.update(r.enabled)
        self.outcomes[r.outcome] += 1
        self.moves.update(r.moves)
        self.notes.update(r.notes)
        self.scheduled.update(r.scheduled)
        if r.failure is not None:
            self.failures.append(r)

    def merge(self, other: CampaignSummary) -> None:
        """Add another summary's counts and failures (a chunk's, into its campaign's)."""
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        self.failures.sort(key=lambda r: r.seed)

    def fault_rows(self) -> list[tuple[str, int, int, int]]:
        """``(kind, faults scheduled, times they struck, seeds that enabled the kind)`` for
        every kind that any seed enabled (a fault with ``times: 3`` strikes up to 3 times; one
        placed past the end of its run never does)."""
        return [
            (kind, self.scheduled[kind], self.faults[kind], self.enabled[kind])
            for kind in ALL_FAULTS
            if self.enabled[kind] or self.faults[kind]
        ]


# --- the state file ------------------------------------------------------------------------

try:  # POSIX; elsewhere a state file is not locked
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

FORMAT: Final = "loopctl-fuzz-state"
VERSION: Final = 1
_SUMMARY: Final = TypeAdapter(CampaignSummary)


class StateError(ValueError, SimError):
    """A state file that cannot be resumed: unreadable (``file:line``), of another campaign
    (what differs), or in use by another client."""


def _seeds_data(seeds: Sequence[int]) -> dict[str, int] | list[int]:
    """A seed range as its ends (a million seeds in a few bytes), other seeds as the list."""
    if seeds and list(seeds) == list(range(seeds[0], seeds[0] + len(seeds))):
        return {"start": seeds[0], "stop": seeds[0] + len(seeds)}
    return list(seeds)


def campaign_identity(seeds: Sequence[int], config: FuzzConfig, out: str | None) -> dict[str, Any]:
    """What makes two runs the same campaign, as the state file's first line holds it."""
    identity = {
        "seeds": _seeds_data(seeds),
        "config": dataclasses.asdict(config),
        "out": os.path.abspath(out) if out is not None else None,
        "loopctl": loopctl.__version__,
    }
    # tuples as lists, as read back; an --input secret scrubbed as the traces scrub it (two
    # campaigns that differ only in a secret are told apart by its fingerprint, when the
    # scrubber has a key: LOOPCTL_SCRUB_KEY)
    normal: dict[str, Any] = scrub(json.loads(json.dumps(identity)))
    return normal


def _differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    names = []
    for key in sorted(set(old) | set(new)):
        if key == "config":
            a, b = old.get(key) or {}, new.get(key) or {}
            names += [f"--{k}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
        elif old.get(key) != new.get(key):
            names.append(key)
    return names


@dataclass
class CampaignState:
    """An open state file (a context manager holding its lock): the chunks done so far
    (``finished``), and ``record`` for the next."""

    path: Path
    _handle: IO[bytes]
    chunk_size: int
    chunks: int
    _loaded: dict[int, CampaignSummary]
    #: whether the file existed (a campaign resumed) or was started by this run
    resumed: bool

    def __post_init__(self) -> None:
        self._done = set(self._loaded)

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        seeds: Sequence[int],
        config: FuzzConfig,
        out: str | None,
        chunk_size: int,
    ) -> CampaignState:
        """The state at ``path``: read and checked against this campaign when the file exists,
        else started with ``chunk_size`` (an existing file keeps its own)."""
        where = Path(path)
        identity = campaign_identity(seeds, config, out)
        try:
            exists = where.exists() and where.stat().st_size > 0
            if not exists:
                chunks = -(-len(seeds) // chunk_size)
                header = {
                    "format": FORMAT,
                    "version": VERSION,
                    "campaign": identity,
                    "chunk_size": chunk_size,
                    "chunks": chunks,
                }
                where.parent.mkdir(parents=True, exist_ok=True)
                # never a file without its first line
                write_atomically(where, json.dumps(header) + "\n")
            handle = where.open("r+b")
        except IsADirectoryError:
            raise StateError(f"--state {where}: is a directory, not a file") from None
        except OSError as exc:
            raise StateError(f"--state {where}: cannot write: {exc.strerror or exc}") from None
        try:
            _lock(handle, where)
            size, chunks, done = _read(handle, where, identity)
        except BaseException:
            handle.close()
            raise
        return cls(where, handle, size, chunks, done, exists)

    @property
    def seeds_done(self) -> int:
        """Seeds of the chunks the file held when it was opened."""
        return sum(s.seeds for s in self._loaded.values())

    def finished(self) -> dict[int, CampaignSummary]:
        """The summary of every chunk the file held when it was opened, by chunk index (a
        copy; the chunks recorded since are the caller's own)."""
        return dict(self._loaded)

    def record(self, chunk: Chunk, summary: CampaignSummary) -> None:
        """Append ``chunk``'s summary and make it durable before returning (its failures'
        files must already be written: from here on the chunk is never run again)."""
        if chunk.index in self._done:
            return
        line = {
            "chunk": chunk.index,
            "seeds": [chunk.seeds[0], chunk.seeds[-1]] if chunk.seeds else [],
            "summary": _SUMMARY.dump_python(summary, mode="json"),
        }
        data = json.dumps(line, separators=(",", ":")).encode() + b"\n"
        # written to the descriptor, unbuffered: a write that fails leaves nothing pending
        # that closing the file would try (and fail) to write again
        fd = self._handle.fileno()
        start = os.lseek(fd, 0, os.SEEK_END)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except OSError as exc:
            # cut what part of the line got out, so the file ends at a whole line again (a
            # resume runs this chunk again; the chunks recorded before are kept)
            with contextlib.suppress(OSError):
                os.ftruncate(fd, start)
                os.lseek(fd, start, os.SEEK_SET)
            raise StateError(
                f"--state {self.path}: cannot record chunk {chunk.index}: "
                f"{exc.strerror or exc}; the chunks recorded before it are kept"
            ) from None
        self._done.add(chunk.index)

    def close(self) -> None:
        self._handle.close()  # closing the file releases its lock

    def __enter__(self) -> CampaignState:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _lock(handle: IO[bytes], where: Path) -> None:
    if fcntl is None:  # pragma: no cover
        return
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        raise StateError(
            f"{where}: another campaign is running with this state file (it is locked)"
        ) from None


def _read(
    handle: IO[bytes], where: Path, identity: dict[str, Any]
) -> tuple[int, int, dict[int, CampaignSummary]]:
    """The chunk size, chunk count and finished chunks; a torn last line is cut off the file."""
    data = handle.read()
    lines = data.split(b"\n")
    torn = lines.pop()  # what follows the last newline: a line cut short by a kill (or b"")
    keep = len(data) - len(torn)
    header = _parse(lines[0] if lines else torn, where, 1)
    if not lines or header.get("format") != FORMAT:
        raise StateError(f"{where}:1: not a loopctl fuzz state file (no {FORMAT} first line)")
    if header.get("version") != VERSION:
        raise StateError(f"{where}:1: state version {header.get('version')!r} is not {VERSION}")
    differ = _differences(header.get("campaign") or {}, identity)
    if differ:
        raise StateError(
            f"{where} is the state of another campaign (it differs in: {', '.join(differ)}); "
            "run the same command to resume it, or name a new --state file"
        )
    size, chunks = int(header["chunk_size"]), int(header["chunks"])
    done: dict[int, CampaignSummary] = {}
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        record = _parse(line, where, number)
        try:
            index = int(record["chunk"])
            summary = _SUMMARY.validate_python(record["summary"])
        except (KeyError, TypeError, ValueError, ValidationError) as exc:
            raise StateError(f"{where}:{number}: not a chunk record ({exc})") from None
        if not 0 <= index < chunks:
            raise StateError(f"{where}:{number}: chunk {index} of a campaign of {chunks} chunks")
        done.setdefault(index, summary)
    if torn:
        handle.seek(keep)
        handle.truncate()
    handle.seek(0, os.SEEK_END)
    return size, chunks, done


def _parse(line: bytes, where: Path, number: int) -> dict[str, Any]:
    with contextlib.suppress(ValueError):  # UnicodeDecodeError included
        data = json.loads(line)
        if isinstance(data, dict):
            return data
    raise StateError(f"{where}:{number}: not a JSON object")
