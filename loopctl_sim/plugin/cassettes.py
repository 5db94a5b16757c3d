"""Cassettes for loopctl's model clients: vcrpy with loopctl's rules, record modes, loud misses.

``use_cassette(path)`` is the one entry (the plugin's ``loopctl_cassette`` marker and fixture use
it too). It adds three things to vcrpy:

- loopctl's rules (``cassette_rules``): matching on method, path and JSON body; secrets scrubbed;
- streams replayed chunk by chunk, as a server sends them (vcrpy hands a body back in one piece,
  so a stream's parser would never see an event arrive alone);
- misses that cannot be swallowed: a ``CassetteMiss`` is kept on the session and raised again
  when the block ends, since a client may turn it into an ordinary failed run.

The record mode is ``none`` by default (``modes``), so CI never records. A recording replaces
the cassette only once it completed (``AtomicPersister``); a ``CassetteNotWritten`` warning says
why it did not. vcrpy is the optional extra ``loopctl[cassettes]``.
"""

from __future__ import annotations

import contextlib
import os
import re
import warnings
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, Final

import httpx
import vcr
from vcr.errors import CannotOverwriteExistingCassetteException
from vcr.persisters.filesystem import CassetteNotFoundError, FilesystemPersister
from vcr.serialize import serialize

from loopctl_sim.errors import SimError
from loopctl_sim.plugin.cassette_rules import (
    parsed_body,
    register_matchers,
    scrub_body,
    vcr_config,
)
from loopctl_sim.plugin.misses import CassetteMiss, describe_miss
from loopctl_sim.plugin.modes import (
    check_record_mode,
    current_record_mode,
)
from loopctl_sim.trace.files import sweep_temporaries, write_atomically
from loopctl_sim.trace.scrub import Scrubber, default_scrubber

_SSE_END = re.compile(rb"(?<=\n\n)|(?<=\n\r\n)")
_LINE_END = re.compile(rb"(?<=\n)")


def split_events(body: bytes, content_type: str) -> list[bytes]:
    """The pieces a server sends ``body`` in: one server-sent event (up to its blank line) or one
    JSON line each; any other body whole."""
    kind = content_type.split(";", 1)[0].strip().lower()
    if kind == "text/event-stream":
        pieces = _SSE_END.split(body)
    elif "ndjson" in kind or "jsonl" in kind:
        pieces = _LINE_END.split(body)
    else:
        pieces = [body]
    return [p for p in pieces if p]


class _Pieces(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A response body handed out piece by piece, to sync and async clients alike."""

    def __init__(self, pieces: Iterable[bytes]) -> None:
        self.pieces = tuple(pieces)

    def __iter__(self) -> Iterator[bytes]:
        yield from self.pieces

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self.pieces:
            yield piece


def _call_of(request: httpx.Request, scrubber: Scrubber) -> tuple[str, str, Any]:
    """What a request is matched on (method, path, scrubbed body as data), as recorded."""
    try:
        content: bytes | None = request.content
    except httpx.RequestNotRead:  # a streamed upload: matched on method and path alone
        content = None
    body = scrub_body(content, scrubber) if content else None
    return request.method.upper(), request.url.path or "/", parsed_body(body)


def _in_pieces(response: httpx.Response) -> httpx.Response:
    stream = response.stream
    if not isinstance(stream, httpx.ByteStream) or response.is_stream_consumed:
        return response
    body = b"".join(stream)
    response.stream = _Pieces(split_events(body, response.headers.get("content-type", "")))
    return response


class CassetteWriteError(OSError, SimError):
    """A recorded cassette could not be written; the cassette that was there is unchanged."""


class AtomicPersister:
    """A vcrpy persister for one cassette session that saves only a completed recording, and
    atomically: vcrpy's own writes in place, so a full disk or a kill leaves a cut file. ``fresh()``
    loads nothing (``rewrite``), rather than deleting the file a failing test would lose."""

    def __init__(self, fresh: Callable[[], bool], complete: Callable[[], bool]) -> None:
        self.fresh = fresh
        self.complete = complete
        self.saved = False
        #: Why the save failed: kept, not raised, so vcrpy still undoes its patches after it.
        self.error: CassetteWriteError | None = None

    def load_cassette(self, cassette_path: Any, serializer: Any) -> Any:
        path = Path(cassette_path)
        sweep_temporaries(path)
        if self.fresh():
            raise CassetteNotFoundError()
        return FilesystemPersister.load_cassette(path, serializer)

    def save_cassette(self, cassette_path: Any, cassette_dict: Any, serializer: Any) -> None:
        if not self.complete():
            return
        path = Path(cassette_path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(path, serialize(cassette_dict, serializer))
        except OSError as exc:
            self.error = CassetteWriteError(
                exc.errno or 0,
                f"cannot write the cassette {path}: {exc.strerror or exc} (the cassette that was "
                "there is unchanged)",
            )
            self.error.__cause__ = exc
            return
        self.saved = True


class CassetteNotWritten(UserWarning):
    """A recording did not complete, so its cassette was not written (the old one is kept)."""


#: The httpx transport methods vcrpy patches, wrapped again inside its patch.
_TARGETS: Final = (
    (httpx.HTTPTransport, "handle_request"),
    (httpx.AsyncHTTPTransport, "handle_async_request"),
    (httpx.MockTransport, "handle_request"),
    (httpx.MockTransport, "handle_async_request"),
)


class CassetteSession:
    """One cassette in use: ``with use_cassette(path) as cassette:`` (vcrpy's ``Cassette``, e.g.
    ``cassette.all_played``): httpx requests within are replayed from (or recorded into) it with
    loopctl's rules. ``record_mode`` defaults to the pytest session's ``--loopctl-record-mode``
    (``none`` outside pytest); a request it cannot answer raises ``CassetteMiss``, again at the
    end of the block if it was swallowed. ``misses`` holds every such request."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        record_mode: str | None = None,
        allow_playback_repeats: bool = False,
        scrubber: Scrubber | None = None,
        raise_on_miss: bool = True,
        hint: str = "",
    ) -> None:
        self.path = Path(path)
        self.requested_mode = record_mode
        self.allow_playback_repeats = allow_playback_repeats
        self.scrubber = scrubber or default_scrubber()
        self.raise_on_miss = raise_on_miss
        self.hint = hint
        self.mode = "none"
        self.misses: list[CassetteMiss] = []
        self.cassette: Any = None
        self._context: Any = None
        self._saved: list[tuple[type, str, Any]] = []
        self._unfinished: str | None = None
        self._failed: list[tuple[tuple[str, str, Any], str]] = []
        self._complete = False
        self._persister: AtomicPersister | None = None

    # completion
    def abandon(self, reason: str) -> None:
        """Do not write what this session recorded (the cassette on disk stays as it is)."""
        self._unfinished = self._unfinished or reason

    @property
    def saved(self) -> bool:
        """Whether the session wrote its cassette."""
        return self._persister is not None and self._persister.saved

    def _broken(self, request: httpx.Request, error: Exception) -> None:
        """A request of the recording failed in the transport: unless the same request is
        recorded later (a retry that got through), the recording is incomplete."""
        if self.mode != "none":
            url = self.scrubber.text(str(request.url.copy_with(query=None)))
            reason = f"{request.method} {url} failed: {type(error).__name__}: {error}"
            self._failed.append((_call_of(request, self.scrubber), reason))

    def _unanswered(self) -> str | None:
        """Why the recording is incomplete: the first failed request never recorded later."""
        recorded = [
            (r.method.upper(), r.path or "/", parsed_body(r.body))
            for r in (self.cassette.requests if self.cassette is not None else [])
        ]
        return next((why for call, why in self._failed if call not in recorded), None)

    # misses
    def report(self) -> str:
        """Every miss's report (each request once), with the hint on recording."""
        text = "\n\n".join(dict.fromkeys(miss.report for miss in self.misses))
        return f"{text}\n{self.hint}" if self.hint and text else text

    def _miss(self, error: CannotOverwriteExistingCassetteException) -> Exception:
        """The error to raise for vcrpy's: a ``CassetteMiss`` kept on the session."""
        if isinstance(error, CassetteMiss) or error.failed_request is None:
            return error  # type: ignore[no-any-return]  # already ours, or cassette metadata
        request = error.failed_request
        report = describe_miss(request, self.cassette, self.mode, self.scrubber, self.path)
        miss = CassetteMiss(report, self.cassette, request)
        self.misses.append(miss)
        return miss

    # patching, inside vcrpy's own
    @contextlib.contextmanager
    def _watching(self, request: httpx.Request) -> Iterator[None]:
        """A transport call: a miss becomes a ``CassetteMiss``, a failure is noted."""
        try:
            yield
        except CannotOverwriteExistingCassetteException as error:
            raise self._miss(error) from None
        except Exception as error:
            self._broken(request, error)
            raise

    def _wrap(self, inner: Any, is_async: bool) -> Any:
        def handle(transport: Any, request: httpx.Request) -> httpx.Response:
            with self._watching(request):
                response = inner(transport, request)
            return _in_pieces(response)

        async def handle_async(transport: Any, request: httpx.Request) -> httpx.Response:
            with self._watching(request):
                response = await inner(transport, request)
            return _in_pieces(response)

        return handle_async if is_async else handle

    def _install(self) -> None:
        for owner, name in _TARGETS:
            inner = getattr(owner, name)
            self._saved.append((owner, name, inner))
            setattr(owner, name, self._wrap(inner, name.endswith("_async_request")))

    def _uninstall(self) -> None:
        while self._saved:
            owner, name, inner = self._saved.pop()
            setattr(owner, name, inner)

    def __enter__(self) -> Any:
        self.mode = check_record_mode(self.requested_mode or current_record_mode())
        mode = "new_episodes" if self.mode == "rewrite" else self.mode
        self._unfinished, self._complete, self._failed = None, False, []
        self._persister = AtomicPersister(
            fresh=lambda: self.mode == "rewrite", complete=lambda: self._complete
        )
        recorder = register_matchers(vcr.VCR(record_mode=mode, **vcr_config(self.scrubber)))
        recorder.register_persister(self._persister)
        self._context = recorder.use_cassette(
            str(self.path), allow_playback_repeats=self.allow_playback_repeats
        )
        self.cassette = self._context.__enter__()
        self._install()
        return self.cassette

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._uninstall()
        if error is not None:
            self.abandon(f"the block raised {type(error).__name__}: {error}")
        unanswered = self._unanswered()
        if unanswered is not None:
            self.abandon(unanswered)
        self._complete = self._unfinished is None
        recorded = bool(self.cassette is not None and self.cassette.dirty)
        try:
            self._context.__exit__(kind, error, traceback)
        finally:
            self._context = None
        failed = self._persister.error if self._persister is not None else None
        if failed is not None and error is None:
            raise failed
        if not self._complete and (recorded or self.mode in ("rewrite", "all")):
            # the reason may quote what the test saw: scrubbed, as everything the plugin writes
            first = self.scrubber.text((str(self._unfinished).splitlines() or [""])[0][:300])
            warnings.warn(
                CassetteNotWritten(
                    f"loopctl cassette {self.path} not written: the recording did not complete "
                    f"({first}); the cassette there is unchanged"
                ),
                stacklevel=2,
            )
        if self.raise_on_miss and self.misses and not isinstance(error, CassetteMiss):
            # the miss was swallowed (or hidden behind what it caused): it is the failure
            raise CassetteMiss(self.report(), self.cassette, self.misses[0].failed_request)


#: ``with use_cassette("cassettes/answer.yaml") as cassette:`` (see ``CassetteSession``).
use_cassette = CassetteSession
