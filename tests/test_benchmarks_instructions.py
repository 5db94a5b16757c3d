"""``benchmarks.instructions``: its units run as the counts assume, and cachegrind's summary is
read right. No count is asserted (cachegrind is not needed here; CI does not run it)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

# ``benchmarks`` is not part of the installed package: import it from the checkout.
_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

instructions = importlib.import_module("benchmarks.instructions")


@pytest.mark.parametrize("unit", sorted(instructions.UNITS))
@pytest.mark.parametrize("n", [0, 1])
def test_every_unit_runs_with_none_and_with_one(unit: str, n: int) -> None:
    """The child's two runs (the count is their difference): both build, one also runs; a
    driven run asserts that its tool ran every turn but the last and its final text came."""
    instructions.run_unit(unit, n)


def test_the_driven_units_run_what_they_build(monkeypatch: pytest.MonkeyPatch) -> None:
    """``n`` runs of the loops built: the same loops are built whatever ``n`` is."""
    built: list[int] = []
    ran: list[int] = []
    real = instructions.loopctl_prepare(kind="async")

    def prepare(turns: int, counter: object) -> object:
        go = real(turns, counter)  # type: ignore[arg-type]
        built.append(turns)

        async def counted() -> str:
            ran.append(turns)
            return await go()

        return counted

    monkeypatch.setattr(instructions, "loopctl_prepare", lambda kind: prepare)
    instructions.run_unit("run", 2)
    warm_up = 3
    assert built == [1] * (warm_up + instructions.UNITS["run"][0])
    assert ran == [1] * (warm_up + 2)


def test_the_instruction_count_is_read_from_cachegrinds_summary() -> None:
    stderr = (
        "==123== Cachegrind, a high-precision tracing profiler\n"
        "==123== \n"
        "==123== I   refs:      30,159,885\n"
    )
    assert instructions.instructions_of(stderr) == 30_159_885
    with pytest.raises(RuntimeError, match="no instruction count"):
        instructions.instructions_of("valgrind: command not found")


def test_an_unknown_unit_is_refused() -> None:
    with pytest.raises(SystemExit) as exc:
        instructions.main(["turns"])
    assert exc.value.code == 2


@pytest.mark.parametrize("piece", instructions.PIECES)
def test_a_traced_run_runs_without_each_piece(piece: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--without``: the piece is off (the patch is undone after the test, as a child process
    would be gone) and the traced run still runs to its end record."""
    from loopctl.core import LoopMachine
    from loopctl_sim.trace.recorder import TraceRecorder
    from loopctl_sim.trace.scrub import Scrubber

    for owner, name in ((TraceRecorder, "io"), (Scrubber, "might_hold"), (LoopMachine, "digest")):
        monkeypatch.setattr(owner, name, getattr(owner, name))
    instructions.run_unit("traced", 1, [piece])
    patched = {"io": TraceRecorder.io, "scrub": Scrubber.might_hold, "digest": LoopMachine.digest}
    assert patched[piece].__name__ == "<lambda>"


def test_an_unknown_piece_is_refused() -> None:
    with pytest.raises(ValueError, match="the pieces are io, scrub, digest"):
        instructions.run_unit("sim", 0, ["trace"])
