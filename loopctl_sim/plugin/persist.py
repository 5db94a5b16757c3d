"""Writing a cassette without losing the one it replaces.

vcrpy's own persister writes into the cassette in place: a full disk or a kill while it writes
leaves a cut file. ``AtomicPersister`` writes beside it and renames over it, so the path holds
the old cassette or the new one, whole, at every moment. It writes only when the session says
its recording completed, and ``rewrite`` starts from an empty cassette instead of deleting the
file, so a test that fails while recording leaves the committed cassette as it was. Temporaries
of a killed writer are swept the next time that cassette is opened or written.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from vcr.persisters.filesystem import CassetteNotFoundError, FilesystemPersister
from vcr.serialize import serialize

from loopctl_sim.errors import SimError
from loopctl_sim.trace.files import sweep_temporaries, write_atomically


class CassetteWriteError(OSError, SimError):
    """A recorded cassette could not be written; the cassette that was there is unchanged."""


def write_cassette(path: Path, data: str) -> None:
    """``data`` at ``path``, whole, or ``CassetteWriteError`` and ``path`` as it was."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, data)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise CassetteWriteError(
            exc.errno or 0,
            f"cannot write the cassette {path}: {reason} (the cassette that was "
            "there is unchanged)",
        ) from exc


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
        sweep_temporaries(path)
        if self.fresh():
            raise CassetteNotFoundError()
        return FilesystemPersister.load_cassette(path, serializer)

    def save_cassette(self, cassette_path: Any, cassette_dict: Any, serializer: Any) -> None:
        if not self.complete():
            return
        try:
            write_cassette(Path(cassette_path), serialize(cassette_dict, serializer))
        except CassetteWriteError as exc:
            self.error = exc
            return
        self.saved = True
