"""``loopctl.otel.OtelObserver`` on live runs of ``BareLoop`` (scripted clients, real tools),
checked through the SDK's in-memory exporter (``test_otel_export`` checks that the same run's
recorded trace exports the same spans)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from otel_helpers import memory_provider, run_scripted, tree

from loopctl.otel import CAPTURE_ENV, OtelObserver, scrub_content


async def test_spans_of_a_live_run() -> None:
    provider, exporter = memory_provider()
    await run_scripted(
        [OtelObserver(provider, agent_name="demo", model="m-1", provider="scripted")]
    )
    nodes = tree(exporter.get_finished_spans())
    assert [(n.name, n.parent) for n in nodes] == [
        ("invoke_agent demo", None),
        ("chat m-1", "invoke_agent demo"),
        ("execute_tool slow", "invoke_agent demo"),
        ("execute_tool slow", "invoke_agent demo"),
        ("chat m-1", "invoke_agent demo"),
        ("execute_tool broken", "invoke_agent demo"),
        ("chat m-1", "invoke_agent demo"),
    ]
    run, chat, s1, s2, _, bad, last = nodes
    assert run.attributes["gen_ai.agent.name"] == "demo"
    assert run.attributes["gen_ai.provider.name"] == "scripted"
    assert run.attributes["loopctl.outcome"] == "completed" and run.status == "UNSET"
    assert chat.attributes["gen_ai.request.model"] == "m-1"
    assert chat.attributes["gen_ai.usage.input_tokens"] == 11
    assert chat.attributes["gen_ai.usage.output_tokens"] == 7
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("tool_use",)
    assert chat.events == ["loopctl.model_error", "loopctl.retry"]
    assert last.attributes["gen_ai.usage.input_tokens"] == 30
    assert {s1.attributes["gen_ai.tool.call.id"], s2.attributes["gen_ai.tool.call.id"]} == {
        "c1",
        "c2",
    }
    # the wave ran its two calls at once: each started before the other ended
    assert s1.start < s2.end and s2.start < s1.end
    assert bad.status == "ERROR" and bad.attributes["error.type"] == "tool_error"
    assert all(run.start <= n.start <= n.end <= run.end for n in nodes)
    assert [n.start for n in nodes] == sorted(n.start for n in nodes)
    assert not any("gen_ai.input.messages" in n.attributes for n in nodes)  # content is opt-in


async def test_content_when_opted_in_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CAPTURE_ENV, "true")
    provider, exporter = memory_provider()
    await run_scripted([OtelObserver(provider)])
    nodes = tree(exporter.get_finished_spans())
    assert '"go"' in nodes[0].attributes["gen_ai.input.messages"]
    tools = [n for n in nodes if n.name == "execute_tool slow"]
    assert {n.attributes["gen_ai.tool.call.result"] for n in tools} == {"done 1", "done 2"}


def test_scrub_content() -> None:
    text = (
        "sk-abcdefghijklmn Bearer abc.def-ghi_jkl ghp_" + "a" * 36 + " xoxb-1234-5678-abcd "
        "AKIAABCDEFGHIJKLMNOP eyJhbGciOiJI.eyJzdWIiOiIx.SflKxwRJSMeKKF2Q and plain words"
    )
    assert scrub_content(text) == (
        "[REDACTED] Bearer [REDACTED] " + " ".join(["[REDACTED]"] * 4) + " and plain words"
    )
    more = (
        "https://me:hunter2pass@proxy.example/v1 AIza" + "B" * 35 + " ASIAABCDEFGHIJKLMNOP\n"
        "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\n-----END PRIVATE KEY-----"
    )
    assert scrub_content(more) == (
        "https://me:[REDACTED]@proxy.example/v1 [REDACTED] [REDACTED]\n"
        "-----BEGIN PRIVATE KEY-----[REDACTED]-----END PRIVATE KEY-----"
    )


def test_importing_without_the_extra_says_what_to_install() -> None:
    code = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "try:\n    import loopctl.otel\n"
        "except ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'loopctl[otel]'" in out.stdout


def test_the_public_names() -> None:
    import loopctl.otel

    assert sorted(loopctl.otel.__all__) == [
        "CAPTURE_ENV",
        "GenAiSpans",
        "INSTRUMENTATION",
        "OtelObserver",
        "REDACTED",
        "scrub_content",
    ]
    assert all(getattr(loopctl.otel, name) is not None for name in loopctl.otel.__all__)
