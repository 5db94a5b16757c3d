"""Pre-tool hooks, post-tool hooks and middleware around ``dispatch``."""

from __future__ import annotations

from typing import Any

import pytest

from loopctl.core import ToolCall, ToolResult
from loopctl.observe import IoEvent
from loopctl.tools import Allow, Deny, NextTool, Replace, ToolRegistry, dispatch, tool
from loopctl.tools.dispatch import PreToolDecision

RAN: list[dict[str, Any]] = []


@tool
def echo(text: str, times: int = 1) -> str:
    RAN.append({"text": text, "times": times})
    return text * times


REGISTRY = ToolRegistry([echo])


@pytest.fixture(autouse=True)
def _clear_ran() -> None:
    RAN.clear()


def echo_call(id: str = "c1", **arguments: Any) -> ToolCall:
    return ToolCall(id=id, name="echo", arguments=arguments or {"text": "hi"})


def error(content: str, id: str = "c1") -> ToolResult:
    return ToolResult(call_id=id, name="echo", content=content, is_error=True)


# --- pre-tool hooks ----------------------------------------------------------------------------


def allow(call: ToolCall) -> PreToolDecision:
    return Allow()


def observe_only(call: ToolCall) -> PreToolDecision:
    return None


async def async_allow(call: ToolCall) -> PreToolDecision:
    return Allow()


def deny_secrets(call: ToolCall) -> PreToolDecision:
    return Deny("no secrets") if "secret" in call.arguments.get("text", "") else Allow()


async def async_deny(call: ToolCall) -> PreToolDecision:
    return Deny("not today")


def shout(call: ToolCall) -> PreToolDecision:
    return Replace({**call.arguments, "text": call.arguments["text"].upper()})


async def twice(call: ToolCall) -> PreToolDecision:
    return Replace({**call.arguments, "times": 2})


@pytest.mark.parametrize(
    ("hooks", "text", "content", "ran"),
    [
        ([], "hi", "hi", True),
        ([allow], "hi", "hi", True),
        ([observe_only], "hi", "hi", True),
        ([async_allow, allow], "hi", "hi", True),
        ([deny_secrets], "hi", "hi", True),
        ([deny_secrets], "secret", "tool 'echo' was denied: no secrets", False),
        ([allow, async_deny], "hi", "tool 'echo' was denied: not today", False),
        ([shout], "hi", "HI", True),
        ([shout, twice], "hi", "HIHI", True),
        ([twice, deny_secrets], "secret", "tool 'echo' was denied: no secrets", False),
    ],
)
async def test_pre_tool_hooks(hooks: list[Any], text: str, content: str, ran: bool) -> None:
    (result,) = await dispatch([echo_call(text=text)], REGISTRY, pre_hooks=hooks)
    assert result.content == content
    assert result.is_error is not ran
    assert bool(RAN) is ran


async def test_a_deny_stops_the_later_hooks() -> None:
    seen: list[str] = []

    def record(call: ToolCall) -> PreToolDecision:
        seen.append(call.id)
        return Allow()

    await dispatch([echo_call()], REGISTRY, pre_hooks=[async_deny, record])
    assert seen == []


async def test_replace_is_seen_by_later_hooks_but_events_keep_the_models_arguments() -> None:
    seen: list[dict[str, Any]] = []
    events: list[IoEvent] = []

    def record(call: ToolCall) -> PreToolDecision:
        seen.append(dict(call.arguments))
        return None

    await dispatch(
        [echo_call(text="hi")], REGISTRY, pre_hooks=[shout, record], on_event=events.append
    )
    assert seen == [{"text": "HI"}]
    assert RAN == [{"text": "HI", "times": 1}]
    assert events[0].data["arguments"] == {"text": "hi"}
    assert events[1].data["content"] == "HI"


async def test_replaced_arguments_are_validated_like_the_models() -> None:
    def bad(call: ToolCall) -> PreToolDecision:
        return Replace({"text": "hi", "times": "lots"})

    (result,) = await dispatch([echo_call()], REGISTRY, pre_hooks=[bad])
    assert result.is_error
    assert "- times: Input should be a valid integer" in result.content
    assert RAN == []


def hook_raises(call: ToolCall) -> PreToolDecision:
    raise RuntimeError("policy store unreachable")


def hook_returns_junk(call: ToolCall) -> PreToolDecision:
    return "yes"  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("hook", "content"),
    [
        (
            hook_raises,
            "tool 'echo' was not run: pre-tool hook hook_raises raised RuntimeError: "
            "policy store unreachable",
        ),
        (
            hook_returns_junk,
            "tool 'echo' was not run: pre-tool hook hook_returns_junk returned str, expected "
            "Allow(), Deny(reason) or Replace(arguments)",
        ),
    ],
)
async def test_broken_pre_hooks_become_error_results(hook: Any, content: str) -> None:
    (result,) = await dispatch([echo_call()], REGISTRY, pre_hooks=[hook])
    assert result == error(content)
    assert RAN == []


async def test_hooks_do_not_run_for_unknown_names() -> None:
    seen: list[str] = []

    def record(call: ToolCall) -> PreToolDecision:
        seen.append(call.name)
        return None

    (result,) = await dispatch(
        [ToolCall(id="g", name="ghost")], REGISTRY, pre_hooks=[record], post_hooks=[]
    )
    assert result.is_error and "not available" in result.content
    assert seen == []


# --- post-tool hooks ---------------------------------------------------------------------------


def redact(call: ToolCall, result: ToolResult) -> ToolResult | None:
    if "secret" in result.content:
        return result.model_copy(update={"content": "[redacted]"})
    return None


async def suffix(call: ToolCall, result: ToolResult) -> ToolResult | None:
    return result.model_copy(update={"content": result.content + "!"})


def post_raises(call: ToolCall, result: ToolResult) -> ToolResult | None:
    raise ValueError("audit log full")


def post_junk(call: ToolCall, result: ToolResult) -> ToolResult | None:
    return 3  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("hooks", "text", "expected"),
    [
        ([redact], "hello", ToolResult(call_id="c1", name="echo", content="hello")),
        ([redact], "secret", ToolResult(call_id="c1", name="echo", content="[redacted]")),
        ([suffix, suffix], "a", ToolResult(call_id="c1", name="echo", content="a!!")),
        ([redact, suffix], "secret", ToolResult(call_id="c1", name="echo", content="[redacted]!")),
        (
            [post_raises],
            "a",
            error(
                "tool 'echo' ran but post-tool hook post_raises raised ValueError: audit log full"
            ),
        ),
        (
            [post_junk, suffix],
            "a",
            error(
                "tool 'echo' ran but post-tool hook post_junk returned int, expected a ToolResult "
                "or None!"
            ),
        ),
    ],
)
async def test_post_tool_hooks(hooks: list[Any], text: str, expected: ToolResult) -> None:
    (result,) = await dispatch([echo_call(text=text)], REGISTRY, post_hooks=hooks)
    assert result == expected


async def test_post_hooks_see_denials_and_the_replaced_call() -> None:
    seen: dict[str, tuple[dict[str, Any], str, bool]] = {}

    def record(call: ToolCall, result: ToolResult) -> ToolResult | None:
        seen[call.id] = (dict(call.arguments), result.content, result.is_error)
        return None

    await dispatch(
        [echo_call(id="1", text="hi"), echo_call(id="2", text="secret")],
        REGISTRY,
        pre_hooks=[deny_secrets, shout],
        post_hooks=[record],
    )
    assert seen == {
        "1": ({"text": "HI"}, "HI", False),
        "2": ({"text": "secret"}, "tool 'echo' was denied: no secrets", True),
    }


async def test_a_result_for_another_call_is_re_addressed_to_the_call_asked() -> None:
    def misaddress(call: ToolCall, result: ToolResult) -> ToolResult | None:
        return ToolResult(call_id="other", name="other", content="rewritten")

    (result,) = await dispatch([echo_call(id="mine")], REGISTRY, post_hooks=[misaddress])
    assert result == ToolResult(call_id="mine", name="echo", content="rewritten")


# --- middleware --------------------------------------------------------------------------------


async def test_middleware_is_composed_in_list_order_first_outermost() -> None:
    order: list[str] = []

    def layer(label: str) -> Any:
        async def middleware(call: ToolCall, next: NextTool) -> ToolResult:
            order.append(f"enter {label}")
            result = await next(call)
            order.append(f"exit {label}")
            return result

        return middleware

    @tool
    def work() -> str:
        order.append("tool")
        return "done"

    def pre(call: ToolCall) -> PreToolDecision:
        order.append("pre")
        return None

    def post(call: ToolCall, result: ToolResult) -> ToolResult | None:
        order.append("post")
        return None

    (result,) = await dispatch(
        [ToolCall(id="w", name="work")],
        ToolRegistry([work]),
        middleware=[layer("outer"), layer("inner")],
        pre_hooks=[pre],
        post_hooks=[post],
    )
    assert result.content == "done"
    assert order == [
        "pre",
        "enter outer",
        "enter inner",
        "tool",
        "exit inner",
        "exit outer",
        "post",
    ]


async def test_middleware_can_short_circuit_and_rewrite_the_call() -> None:
    cache = {"cached": "from cache"}

    async def caching(call: ToolCall, next: NextTool) -> ToolResult:
        hit = cache.get(call.arguments["text"])
        if hit is not None:
            return ToolResult(call_id=call.id, name=call.name, content=hit)
        return await next(call.model_copy(update={"arguments": {**call.arguments, "times": 3}}))

    results = await dispatch(
        [echo_call(id="1", text="cached"), echo_call(id="2", text="ab")],
        REGISTRY,
        middleware=[caching],
    )
    assert [r.content for r in results] == ["from cache", "ababab"]
    assert RAN == [{"text": "ab", "times": 3}]


async def test_middleware_sees_tool_failures_as_error_results_not_exceptions() -> None:
    seen: list[ToolResult] = []

    async def watch(call: ToolCall, next: NextTool) -> ToolResult:
        result = await next(call)
        seen.append(result)
        return result

    (result,) = await dispatch([echo_call(times="x")], REGISTRY, middleware=[watch])
    assert seen == [result]
    assert result.is_error and "invalid arguments for tool 'echo'" in result.content


async def test_a_failing_middleware_becomes_an_error_result_the_outer_layer_sees() -> None:
    seen: list[ToolResult] = []

    async def outer(call: ToolCall, next: NextTool) -> ToolResult:
        result = await next(call)
        seen.append(result)
        return result

    async def broken(call: ToolCall, next: NextTool) -> ToolResult:
        raise LookupError("rate table missing")

    async def junk(call: ToolCall, next: NextTool) -> ToolResult:
        return "ok"  # type: ignore[return-value]

    (failed,) = await dispatch([echo_call()], REGISTRY, middleware=[outer, broken])
    expected = error("tool 'echo' failed in middleware broken: LookupError: rate table missing")
    assert failed == expected
    assert seen == [expected]
    assert RAN == []

    (wrong,) = await dispatch([echo_call()], REGISTRY, middleware=[junk])
    assert wrong.is_error
    assert wrong.content.endswith("returned str, expected a ToolResult")


class Audit:
    """A callable object as a hook: messages name its class."""

    def __call__(self, call: ToolCall) -> PreToolDecision:
        raise PermissionError("audit refused")


async def test_a_callable_object_hook_is_named_by_its_class() -> None:
    (result,) = await dispatch([echo_call()], REGISTRY, pre_hooks=[Audit()])
    assert result == error(
        "tool 'echo' was not run: pre-tool hook Audit raised PermissionError: audit refused"
    )
