"""Drive the brain through a scripted run and print every step and feed.

No model, no network: the "world" is a list of scripted replies and a dict of tools. This is the
whole sans-IO loop in thirty lines: ask the brain, do what it says, report back.
"""

from __future__ import annotations

from loopctl import (
    CallLLM,
    CallTools,
    Compact,
    Done,
    LoopMachine,
    MachinePolicy,
    Message,
    ToolCall,
    ToolResult,
)

TOOLS = {"add": lambda a, b: a + b}
REPLIES = [
    Message.assistant("Let me add.", [ToolCall(id="c1", name="add", arguments={"a": 2, "b": 3})]),
    Message.assistant("", [ToolCall(id="c2", name="add", arguments={"a": 5, "b": 10})]),
    Message.assistant("2 + 3 + 10 = 15."),
]


def main() -> None:
    machine = LoopMachine()
    machine.accept_input("What is 2 + 3 + 10?")
    print("feed  accept_input('What is 2 + 3 + 10?')")
    policy = MachinePolicy(tools=tuple(TOOLS), max_turns=10)
    replies = iter(REPLIES)
    while True:
        step = machine.next_step(policy)
        print(f"step  {step!r}")
        if isinstance(step, CallLLM):
            reply = next(replies)
            machine.model_response(reply, context_tokens=100 * step.turn)
            print(f"feed  model_response({reply.text!r}, calls={len(reply.tool_calls)})")
        elif isinstance(step, CallTools):
            results = [
                ToolResult(call_id=c.id, name=c.name, content=str(TOOLS[c.name](**c.arguments)))
                for c in step.calls
            ]
            machine.tool_results(Message.from_results(results))
            print(f"feed  tool_results({[r.content for r in results]})")
        elif isinstance(step, Compact):
            machine.compaction_noop(machine.context_tokens, machine.context_tokens)
        elif isinstance(step, Done):
            machine.commit_pending()
            print(f"done  {step.outcome!r}; history holds {machine.history_len()} messages")
            print(f"digest {machine.digest()}")
            return


if __name__ == "__main__":
    main()
