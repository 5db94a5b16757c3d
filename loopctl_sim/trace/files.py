"""Where a trace's bytes come from and go to: plain files, gzip-compressed files, stdin.

A name ending in ``.gz`` is written gzip-compressed, with a sync flush after every record, so a
crash still loses at most the record being written; a compressed trace is read whatever its name
(by its first two bytes). ``-`` reads stdin, copied once to a temporary file, since a replay
reads a trace twice. A trace rewritten whole goes to a temporary file beside it, named for its
process (``temporary_beside``), which replaces it once complete; the next rewrite removes those
a killed process left. Every file the harness writes whole goes through ``write_atomically``:
it is the old file or the new one, whole, at every moment.
"""

from __future__ import annotations

import atexit
import contextlib
import gzip
import io
import os
import re
import secrets
import shutil
import sys
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Final

from loopctl_sim.errors import SimError

#: The path that means stdin.
STDIN: Final = "-"
#: How messages name it.
STDIN_NAME: Final = "<stdin>"
_GZIP_MAGIC: Final = b"\x1f\x8b"
_stdin_copy: str | None = None


class CutShort(SimError):
    """A compressed trace whose data is damaged past the records read so far (``detail``)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def is_gzip_name(path: str | os.PathLike[str]) -> bool:
    """Whether the name asks for gzip (it ends in ``.gz``)."""
    return os.fspath(path).endswith(".gz")


def display_name(path: str | os.PathLike[str]) -> str:
    """How messages name the trace at ``path``."""
    text = os.fspath(path)
    return STDIN_NAME if text == STDIN else text


def stdin_trace() -> str:
    """The path of a file holding what stdin held: copied once, on the first call, and removed
    when the process exits."""
    global _stdin_copy
    if _stdin_copy is None:
        fd, name = tempfile.mkstemp(prefix="loopctl-stdin-", suffix=".jsonl")
        with os.fdopen(fd, "wb") as out:
            shutil.copyfileobj(sys.stdin.buffer, out)
        atexit.register(_remove, name)
        _stdin_copy = name
    return _stdin_copy


def _remove(name: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(name)


def open_for_reading(path: str | os.PathLike[str]) -> IO[bytes]:
    """The trace's bytes, decompressed when they are gzip's; ``-`` is stdin. ``OSError`` when it
    cannot be opened."""
    source = stdin_trace() if os.fspath(path) == STDIN else os.fspath(path)
    raw = open(source, "rb")  # noqa: SIM115 - handed to the caller, who closes it
    try:
        magic = raw.peek(2)[:2]
    except OSError:
        raw.close()
        raise
    if magic == _GZIP_MAGIC:
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    return raw


class GzipLines:
    """The lines of a compressed trace. Cut short (the stream ends before its end marker, as a
    killed writer leaves it), it ends after the last whole record and sets ``cut``; damaged data
    raises ``CutShort`` where it is met."""

    def __init__(self, f: IO[bytes]) -> None:
        self.f = f
        self.cut = False

    def __iter__(self) -> GzipLines:
        return self

    def __next__(self) -> bytes:
        try:
            line = self.f.readline()
        except EOFError:
            self.cut = True
            raise StopIteration from None
        except (gzip.BadGzipFile, zlib.error, OSError) as exc:
            raise CutShort(f"the compressed data is damaged ({exc})") from None
        if not line:
            raise StopIteration
        return line


def lines_of(f: IO[bytes]) -> Iterator[bytes]:
    """The lines of ``f``: the file itself when plain (nothing in the reader's way), else
    ``GzipLines``."""
    if isinstance(f, gzip.GzipFile):
        return GzipLines(f)
    return f


def open_for_writing(path: str | os.PathLike[str], *, append: bool = False) -> IO[str]:
    """A text file to write the trace to, gzip-compressed when the name ends in ``.gz``.
    ``append`` adds to an existing plain trace (a compressed one is written whole)."""
    if is_gzip_name(path):
        if append:
            raise ValueError(f"{os.fspath(path)}: a compressed trace cannot be appended to")
        binary = gzip.open(path, "wb")  # noqa: SIM115 - wrapped and handed to the caller
        return io.TextIOWrapper(binary, encoding="utf-8", write_through=True)
    return open(path, "a" if append else "w", encoding="utf-8")


def complete_prefix(path: str | os.PathLike[str]) -> tuple[int, int]:
    """``(records, size)`` of the complete lines at the start of the plain file at ``path``: a
    torn last line (no newline) is not counted, and ``size`` ends before it."""
    records = size = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            records += chunk.count(b"\n")
            last = chunk.rfind(b"\n")
            size = f.tell() - len(chunk) + last + 1 if last != -1 else size
    return records, size


#: What ends the name of a temporary file that replaces a trace (before a kept ``.gz``).
TEMP_SUFFIX: Final = ".loopctl-tmp"


def temporary_beside(path: str | os.PathLike[str]) -> str:
    """A new empty file beside ``path`` to write its replacement into:
    ``<name>.<pid>-<random>.loopctl-tmp``, ``.gz`` kept (the writer compresses by the name)."""
    target = Path(path)
    sweep_temporaries(target)
    tail = ".gz" if is_gzip_name(target) else ""
    while True:
        name = f"{target.name}.{os.getpid()}-{secrets.token_hex(4)}{TEMP_SUFFIX}{tail}"
        temp = target.with_name(name)
        try:
            # 0o666 less the umask: the mode a plain open() gives a new file
            os.close(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:  # pragma: no cover - 32 random bits met another file
            continue
        return os.fspath(temp)


def sweep_temporaries(path: str | os.PathLike[str]) -> list[str]:
    """Remove the temporary files beside ``path`` whose process no longer runs; the ones
    removed. Where processes cannot be asked (not POSIX), nothing is removed."""
    target = Path(path)
    pattern = re.compile(
        re.escape(target.name) + r"\.([0-9]+)-[0-9a-f]{8}" + re.escape(TEMP_SUFFIX) + r"(\.gz)?"
    )
    removed: list[str] = []
    try:
        names = os.listdir(target.parent)
    except OSError:
        return removed
    for name in names:
        found = pattern.fullmatch(name)
        if found is None or _running(int(found.group(1))):
            continue
        with contextlib.suppress(OSError):
            os.unlink(target.with_name(name))
            removed.append(os.fspath(target.with_name(name)))
    return removed


def _running(pid: int) -> bool:
    """Whether process ``pid`` runs (this one does; unknown counts as running)."""
    if pid == os.getpid() or os.name != "posix":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # not ours to signal (another user's): it runs
        return True
    return True


def replace_with(temporary: str | os.PathLike[str], path: str | os.PathLike[str]) -> None:
    """Move the complete file ``temporary`` (``temporary_beside``'s) over ``path``: the file it
    replaces keeps its mode (as a plain rewrite in place would), and the rename is made durable
    where the platform lets a directory be synced."""
    with contextlib.suppress(OSError):
        os.chmod(temporary, os.stat(path).st_mode & 0o7777)
    os.replace(temporary, path)
    _sync_directory(Path(path).parent)


def write_atomically(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` whole or not at all: on any failure the
    temporary file is removed and an old file is left as it was. The ``OSError`` names ``path``
    (``filename``), not the temporary file, so a message names the file the user asked for."""
    temporary = temporary_beside(path)
    try:
        with open(temporary, "wb") as file:
            file.write(data.encode("utf-8") if isinstance(data, str) else data)
            file.flush()
            os.fsync(file.fileno())
        replace_with(temporary, path)
    except OSError as exc:
        _remove(temporary)
        if exc.filename is None or os.fspath(exc.filename) == os.fspath(temporary):
            exc.filename = os.fspath(path)
        raise
    except BaseException:
        _remove(temporary)
        raise


def _sync_directory(directory: Path) -> None:
    """Make a rename in ``directory`` durable (best effort: some platforms cannot open one)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
