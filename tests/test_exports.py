"""The public surface: every name in ``__all__`` resolves, and the contract's names are there."""

from __future__ import annotations

import importlib

import pytest

PACKAGES = [
    "loopctl",
    "loopctl.core",
    "loopctl.driver",
    "loopctl.tools",
    "loopctl.providers",
    "loopctl.testing",
    "loopctl.errors",
    "loopctl_sim",
    "loopctl_sim.errors",
]

CONTRACT = {
    "loopctl": [
        "LoopMachine",
        "MachinePolicy",
        "MachineStep",
        "CallLLM",
        "CallTools",
        "Compact",
        "Done",
        "CompactReason",
        "MachineState",
        "MachineOutcome",
        "Completed",
        "Cancelled",
        "MaxTurnsExceeded",
        "Failed",
        "LoopError",
        "LoopctlError",
        "ProtocolError",
        "Message",
        "TextPart",
        "ToolCall",
        "ToolResult",
        "ThinkingPart",
        "ProviderPart",
        "BareLoop",
        "RunConfig",
        "SessionConfig",
        "RunResult",
        "CancelSignal",
        "ApiClient",
        "tool",
        "MiddleOutCompactor",
        "SummarizingCompactor",
        "ContextCompactor",
        "Reflector",
    ],
    "loopctl.providers": [
        "OpenAIClient",
        "OpenAIResponsesClient",
        "AnthropicClient",
        "OllamaClient",
    ],
    "loopctl.testing": ["ScriptedClient", "FunctionClient", "ExploringClient", "block_network"],
    "loopctl.errors": ["LoopctlError", "ProtocolError", "ApiError", "ToolError", "McpError"],
    "loopctl_sim": ["TraceRecorder", "replay_trace", "simulate", "check_machine", "SimError"],
    "loopctl_sim.errors": ["SimError"],
}


@pytest.mark.parametrize("name", PACKAGES)
def test_all_names_resolve_once(name: str) -> None:
    module = importlib.import_module(name)
    exported = module.__all__
    assert len(exported) == len(set(exported))
    for symbol in exported:
        assert getattr(module, symbol, None) is not None, f"{name}.{symbol}"


@pytest.mark.parametrize(("name", "symbols"), sorted(CONTRACT.items()))
def test_contract_names_are_public(name: str, symbols: list[str]) -> None:
    module = importlib.import_module(name)
    missing = [s for s in symbols if s not in module.__all__]
    assert missing == []
