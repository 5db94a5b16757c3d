"""Writing a cassette without losing the one it replaces.

vcrpy's own persister opens the cassette for writing and writes into it: a full disk, a crash or
a kill -9 while it writes leaves a cut file where the committed cassette was. ``AtomicPersister``
writes the new cassette into a temporary file beside it (same directory, so the rename stays on
one filesystem), flushes it to disk, and renames it over the old one (``os.replace``): the path
holds the old cassette or the new one, whole, at every moment. It writes only when the session
says its recording completed (``CassetteSession`` tells it; the pytest plugin does not complete a
session whose test failed), and ``rewrite`` starts from an empty cassette instead of deleting the
file first, so a test that fails while recording afresh leaves the committed cassette as it was.

A temporary file is named ``.<cassette name>.<pid>.loopctl-tmp``; one whose process is gone (a
writer killed mid-write) is deleted the next time that cassette is opened, so nothing stray is
left for the next run or for ``git add``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from vcr.persisters.filesystem import CassetteNotFoundError, FilesystemPersister
from vcr.serialize import serialize

from loopctl_sim.errors import SimError

__all__ = ["TEMP_SUFFIX", "AtomicPersister", "CassetteWriteError", "remove_stale_temporaries"]

#: How a cassette's temporary file ends.
TEMP_SUFFIX: Final = ".loopctl-tmp"


class CassetteWriteError(OSError, SimError):
    """A recorded cassette could not be written; the cassette that was there is unchanged."""


def _temporary(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}{TEMP_SUFFIX}")


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: leave its file alone
    return True


def remove_stale_temporaries(path: Path) -> list[Path]:
    """Delete the temporary files a writer of the cassette at ``path`` left when it died; returns
    them."""
    removed: list[Path] = []
    prefix = f".{path.name}."
    if not path.parent.is_dir():
        return removed
    for candidate in path.parent.iterdir():
        name = candidate.name
        if not (name.startswith(prefix) and name.endswith(TEMP_SUFFIX)):
            continue
        pid = name[len(prefix) : -len(TEMP_SUFFIX)]
        if pid.isdigit() and not _alive(int(pid)):
            with contextlib.suppress(FileNotFoundError):
                candidate.unlink()
                removed.append(candidate)
    return removed


def _fsync_directory(directory: Path) -> None:
    """Make the rename itself durable (where the platform lets a directory be opened)."""
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


def write_atomically(path: Path, data: str) -> None:
    """``data`` at ``path``, whole, or ``CassetteWriteError`` and ``path`` as it was."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = _temporary(path)
    try:
        with open(temporary, "w", encoding="utf-8") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            temporary.unlink()
        reason = exc.strerror or str(exc)
        raise CassetteWriteError(
            exc.errno or 0,
            f"cannot write the cassette {path}: {reason} (the cassette that was "
            "there is unchanged)",
        ) from exc
    _fsync_directory(path.parent)


class AtomicPersister:
    """A vcrpy persister (``VCR.register_persister``) for one cassette session: it loads as vcrpy's
    does (nothing when ``fresh()`` says to start empty) and saves atomically, only when
    ``complete()`` says the recording completed."""

    def __init__(self, fresh: Callable[[], bool], complete: Callable[[], bool]) -> None:
        self.fresh = fresh
        self.complete = complete
        self.saved = False
        #: Why the save failed: kept, not raised, so vcrpy still undoes its patches after it.
        self.error: CassetteWriteError | None = None

    def load_cassette(self, cassette_path: Any, serializer: Any) -> Any:
        path = Path(cassette_path)
        remove_stale_temporaries(path)
        if self.fresh():
            raise CassetteNotFoundError()
        return FilesystemPersister.load_cassette(path, serializer)

    def save_cassette(self, cassette_path: Any, cassette_dict: Any, serializer: Any) -> None:
        if not self.complete():
            return
        try:
            write_atomically(Path(cassette_path), serialize(cassette_dict, serializer))
        except CassetteWriteError as exc:
            self.error = exc
            return
        self.saved = True
