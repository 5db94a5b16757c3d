"""Damaged traces: every one is refused with ``file:line`` (exit 2) or diverges at a named record
(exit 1), at machine and driver level, never a traceback; nothing damaged replays silently as a
different run. Random bit flips and byte cuts of plain and compressed traces, and hand-made damage
(a line that is not JSON, a seq out of order, a record before the header, an empty line, a
header of another format or version, a damaged snapshot record), including what ``resume`` says.
"""

from __future__ import annotations

import gzip
import json
import random
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from loopctl_sim.cli import main

TRACES = Path(__file__).parents[1] / "traces"
FLIPS = 60
LOCATED = re.compile(r"\S+\.jsonl(\.gz)?:\d+: ")


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output + (result.stderr if result.stderr_bytes else "")


def check(path: Path, level: str) -> int:
    code, out = cli("replay", level, str(path))
    assert "Traceback" not in out, out
    assert code in (0, 1, 2), out
    if code == 2:
        assert LOCATED.search(out) and not re.search(r"\.jsonl(\.gz)?:0: ", out), out
    if code == 1:
        assert re.search(r"divergence at seq \d+ \(\S+:[1-9]\d*\)", out), out
    return code


def flipped(data: bytes, rng: random.Random) -> bytes:
    damaged = bytearray(data)
    i = rng.randrange(len(damaged))
    damaged[i] ^= 1 << rng.randrange(8)
    return bytes(damaged)


@pytest.mark.parametrize("name", ["basic", "cancel", "crash_restore"])
@pytest.mark.parametrize("level", ["--machine", "--driver"])
def test_bit_flips_of_a_plain_trace_are_refused_or_located(
    tmp_path: Path, name: str, level: str
) -> None:
    source = (TRACES / "driver" / f"{name}.jsonl").read_bytes()
    rng = random.Random(f"{name}{level}")
    codes = []
    for i in range(FLIPS):
        path = tmp_path / f"{name}_{i}.jsonl"
        path.write_bytes(flipped(source, rng))
        codes.append(check(path, level))
    assert codes.count(0) < FLIPS // 2  # most flips are caught (the rest land in durations...)


@pytest.mark.parametrize("level", ["--machine", "--driver"])
def test_bit_flips_of_a_compressed_trace_are_refused_or_located(tmp_path: Path, level: str) -> None:
    source = gzip.compress((TRACES / "driver" / "basic.jsonl").read_bytes())
    rng = random.Random(level)
    codes = []
    for i in range(FLIPS):
        path = tmp_path / f"basic_{i}.jsonl.gz"
        path.write_bytes(flipped(source, rng))
        codes.append(check(path, level))
    assert codes.count(0) < FLIPS // 2


@pytest.mark.parametrize("level", ["--machine", "--driver"])
def test_a_compressed_trace_cut_anywhere_replays_what_it_holds(tmp_path: Path, level: str) -> None:
    source = gzip.compress((TRACES / "driver" / "basic.jsonl").read_bytes())
    for cut in range(20, len(source), max(1, len(source) // 25)):
        path = tmp_path / "cut.jsonl.gz"
        path.write_bytes(source[:cut])
        assert check(path, level) in (0, 2)  # 2 only before a whole header


def lines(name: str = "basic") -> list[str]:
    return (TRACES / "driver" / f"{name}.jsonl").read_text().splitlines()


def seq_of(line: str, seq: int) -> str:
    return re.sub(r'^\{"seq":\d+', f'{{"seq":{seq}', line)


DAMAGE = {
    "not-json": (lambda ls: [*ls[:3], "{not json", *ls[4:]], 4),
    "seq-out-of-order": (lambda ls: [*ls[:3], seq_of(ls[3], 9), *ls[4:]], 4),
    "record-before-header": (
        lambda ls: [seq_of(ls[1], 0), *[seq_of(x, i + 1) for i, x in enumerate(ls)]],
        1,
    ),
    "empty-line": (lambda ls: [*ls[:3], "", *ls[3:]], 4),
    "other-format": (lambda ls: [ls[0].replace('"loopctl-trace"', '"other-trace"'), *ls[1:]], 1),
    "future-version": (lambda ls: [ls[0].replace('"version":4', '"version":9', 1), *ls[1:]], 1),
    "unknown-record": (
        lambda ls: [*ls[:3], ls[3].replace('"type":"io"', '"type":"bogus"'), *ls[4:]],
        4,
    ),
    "damaged-header-snapshot": (
        lambda ls: [ls[0].replace('"turns_taken":0', '"turns_taken":-3', 1), *ls[1:]],
        1,
    ),
}


@pytest.mark.parametrize("case", DAMAGE, ids=DAMAGE.keys())
@pytest.mark.parametrize("level", ["--machine", "--driver"])
def test_hand_made_damage_is_refused_with_its_line(tmp_path: Path, case: str, level: str) -> None:
    make, line = DAMAGE[case]
    path = tmp_path / f"{case}.jsonl"
    path.write_text("\n".join(make(lines())) + "\n")
    code, out = cli("replay", level, str(path))
    assert code == 2, out
    assert f"{path}:{line}: " in out and "Traceback" not in out


def test_a_damaged_snapshot_record_is_refused_by_resume(tmp_path: Path) -> None:
    source = lines()
    header = json.loads(source[0])
    snapshot = {"digest": "0" * 16, "snapshot": header["snapshot"]}  # not the brain it names
    record = {
        "seq": 3,
        "type": "io",
        "kind": "snapshot",
        "turn": None,
        "data": snapshot,
        "duration_s": None,
        "scrubbed": False,
    }
    trace = [
        *source[:3],
        json.dumps(record, separators=(",", ":")),
        *[seq_of(x, i + 4) for i, x in enumerate(source[3:6])],
    ]
    path = tmp_path / "snap.jsonl"
    path.write_text("\n".join(trace) + "\n")
    code, out = cli("resume", str(path), "--agent", "killable_agent:build")
    assert code == 2, out
    assert f"{path}:4: the snapshot is not the brain it names" in out
    assert check(path, "--machine") == 0  # replay does not replay the world: io records pass
