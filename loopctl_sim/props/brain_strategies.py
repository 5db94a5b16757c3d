"""What ``BrainMachine`` draws: policies, starting conversations, replies, token counts, errors,
compactions and a well-behaved driver's moves, skewed on purpose (few tool names and fixed
arguments, so equal calls, hence loops, are common; token fractions around the thresholds;
small windows and turn limits): uniform draws would almost never reach the brain's rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, TypeAlias

from hypothesis import strategies as st

from loopctl.core import MAX_LOOP_WINDOW, LoopError, MachinePolicy, Message, ToolCall, ToolResult

TOOL_NAMES: Final = ("read", "write", "search", "shell")

Args: TypeAlias = dict[str, Any]
#: A call as drawn: (a known tool?, index into the advertised names, arguments). The machine
#: turns it into a ``ToolCall`` against the tools advertised at the time.
CallSpec: TypeAlias = tuple[bool, int, Args]

_json_leaf = st.none() | st.booleans() | st.integers(-3, 3) | st.text("ab", max_size=2)
#: Any JSON value without floats: what a parsed arguments object can hold and round-trip exactly.
JSON_ARGUMENTS: Final = st.dictionaries(
    st.text("kpq", min_size=1, max_size=2),
    st.recursive(
        _json_leaf,
        lambda inner: (
            st.lists(inner, max_size=2)
            | st.dictionaries(st.text("xy", max_size=1), inner, max_size=2)
        ),
        max_leaves=4,
    ),
    max_size=2,
)


#: A few fixed argument objects (nested ones too): equal calls, hence loops, happen often.
COMMON_ARGUMENTS: Final[tuple[Args, ...]] = (
    {},
    {},
    {},
    {"path": "a"},
    {"path": "b"},
    {"n": 1},
    {"path": "a", "n": 1},
    {"q": {"x": [1, 2]}},
    {"k": [None, True, "s"]},
)


def tool_arguments(rare_json: bool = True) -> st.SearchStrategy[Args]:
    """Mostly ``COMMON_ARGUMENTS``; with ``rare_json``, now and then any JSON object."""
    common = st.sampled_from(COMMON_ARGUMENTS)
    if not rare_json:
        return common
    return st.one_of(common, common, common, JSON_ARGUMENTS)


@st.composite
def policies(draw: st.DrawFn, tool_names: Sequence[str] = TOOL_NAMES) -> MachinePolicy:
    """Small policies: few turns, a small window, thresholds near the counts drawn elsewhere."""
    compact = draw(st.sampled_from([0.5, 0.7, 0.8, 0.9]))
    emergency = draw(st.sampled_from([compact, 0.9, 0.95, 1.0, 1.2]).filter(lambda e: e >= compact))
    window = draw(st.integers(2, 12))
    n_tools = draw(st.sampled_from([0, 1, 2, 3, 3]))
    return MachinePolicy(
        max_turns=draw(st.sampled_from([0, 1, 2, 3, 4, 5, 6, 8])),
        context_window=draw(st.sampled_from([100, 1000, 128_000])),
        compact_threshold=compact,
        emergency_threshold=emergency,
        tools=tuple(draw(st.lists(st.sampled_from(tool_names), unique=True, max_size=n_tools))),
        loop_window=min(window, MAX_LOOP_WINDOW),
        loop_repeat_limit=draw(st.integers(2, 4)),
        loop_action=draw(st.sampled_from(["warn", "fail", "off"])),
    )


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    """Provider-valid starting conversations (ids ``h<n>``, distinct from the test's calls)."""
    out: list[Message] = []
    if draw(st.booleans()):
        out.append(Message.system("be brief"))
    for i in range(draw(st.integers(0, 2))):
        out.append(Message.user(f"question {i}"))
        if draw(st.booleans()):
            call = ToolCall(id=f"h{i}", name=draw(st.sampled_from(TOOL_NAMES)))
            out.append(Message.assistant(tool_calls=[call]))
            out.append(
                Message.from_results([ToolResult(call_id=call.id, name=call.name, content="ok")])
            )
        out.append(Message.assistant(f"answer {i}"))
    return out


def _units(messages: Sequence[Message]) -> list[list[Message]]:
    """Split a closed conversation into units a cut may not separate: an assistant message with
    calls together with its results message; any other message alone."""
    units: list[list[Message]] = []
    i = 0
    while i < len(messages):
        if messages[i].tool_calls and i + 1 < len(messages):
            units.append([messages[i], messages[i + 1]])
            i += 2
        else:
            units.append([messages[i]])
            i += 1
    return units


COMPACTION_MODES: Final = (
    "middle_out",
    "tail",
    "head_and_summary",
    "summary_only",
    "unchanged",
    "same_length",
)


def compaction_of(messages: Sequence[Message], mode: str, history_len: int = 0) -> list[Message]:
    """A provider-valid compaction of a closed conversation, in one of ``COMPACTION_MODES``
    (named for what they keep of its units); ``same_length`` rewrites it as ``history_len``
    summaries, the length of the history it replaces (a swap that caches keyed on length alone
    would miss)."""
    units = _units(messages)
    flat = [m for u in units for m in u]
    summary = Message.user(f"[summary of {len(flat)} messages]")
    if mode == "same_length":
        return [Message.user(f"[part {i + 1} of {len(flat)} messages]") for i in range(history_len)]
    if mode == "unchanged" or (len(units) <= 1 and mode == "middle_out"):
        return flat
    if mode == "middle_out":
        return [*units[0], summary, *units[-1]]
    if mode == "tail":
        return list(units[-1]) if units else []
    if mode == "head_and_summary":
        return [*(units[0] if units else []), summary]
    if mode == "summary_only":
        return [summary]
    raise ValueError(f"unknown compaction mode {mode!r}")


#: How many turns a run takes before cancel and fail are enabled (drawn per run), so that runs
#: get somewhere before they are interrupted.
PATIENCE: Final = st.sampled_from([0, 1, 2, 2, 3, 4])
#: Whether ``setup`` starts the run (most programs do; the rest leave ``accept_input`` to the
#: rules).
STARTS: Final = st.sampled_from([True, True, True, False])
#: Context counts as fractions of the window: at, just under and over the usual thresholds.
TOKEN_FRACTIONS: Final = st.sampled_from(
    [0.0, 0.1, 0.5, 0.69, 0.7, 0.79, 0.8, 0.85, 0.9, 0.94, 0.95, 1.0, 1.3]
)
TEXTS: Final = st.sampled_from(["", "ok", "done", "let me look", " ", "a\nb", "ünï"])
ERRORS: Final = st.builds(
    LoopError,
    kind=st.sampled_from(["network", "timeout", "provider", "tool", "internal"]),
    message=st.sampled_from(["boom", "reset by peer"]),
    retryable=st.booleans(),
)


@st.composite
def _calls(draw: st.DrawFn) -> list[CallSpec]:
    """0 to 3 calls, each a known tool (by index into the advertised names) 3 times in 4; now
    and then the same call repeated, and mostly the first tool with no arguments (``{}``), so
    that the loop detector has loops to find."""
    n = draw(st.sampled_from([0, 1, 1, 1, 2, 2, 3]))
    known = st.sampled_from([True, True, True, False])
    spec = st.tuples(known, st.sampled_from([0, 0, 1, 2, 3, 5, 7]), tool_arguments())
    if n > 1 and draw(st.sampled_from([False, False, True])):
        return [draw(spec)] * n
    return [draw(spec) for _ in range(n)]


CALLS: Final = _calls()

#: One iteration of the driver: (reply text, reply calls, token fraction, compaction mode).
Move: TypeAlias = tuple[str, list[CallSpec], float, str]
_MOVE_TOKENS: Final = st.sampled_from([0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 0.9, 1.0])
#: The compactions of a misbehaving compactor a move may draw (``brain_compactions``).
MISBEHAVING_MODES: Final = ("orphan_results", "calls_unanswered", "reordered_pair", "growing")
#: A ``Move`` as drawn; its token fractions are coarser than ``TOKEN_FRACTIONS``, none over 1;
#: its compaction is a valid mode, a no-op, or a misbehaving compactor's.
MOVES: Final = st.tuples(
    TEXTS, CALLS, _MOVE_TOKENS, st.sampled_from((*COMPACTION_MODES, "noop", *MISBEHAVING_MODES))
)
