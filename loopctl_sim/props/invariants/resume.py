"""Resume: a machine saved at any point restores exactly, and decides the same once restored;
crash recovery stands on this, so every check asks restored copies.
"""

from __future__ import annotations

import hashlib
import re

from pydantic import ValidationError

from loopctl.core import LoopMachine, MachinePolicy, MachineStep, ProtocolError, Terminal
from loopctl_sim.props.invariants.conversation import open_tail_allowed
from loopctl_sim.props.invariants.problems import InvariantCode
from loopctl_sim.props.invariants.problems import problem as _p


def _sealed(content: bytes) -> bytes:
    """The snapshot's JSON sealed as docs/brain.md says (version 3 in the head, the sha256 of the
    content before the closing brace), written here so a wrong seal is not its own reference."""
    head, history, rest = content.partition(b',"history":')
    sealed_head = re.sub(rb'"version":\d+', b'"version":3', head, count=1)
    tail = b',"checksum":"' + hashlib.sha256(content).hexdigest().encode() + b'"}'
    return sealed_head + history + rest.removesuffix(b"}") + tail


def _ask(machine: LoopMachine, policy: MachinePolicy) -> MachineStep | str:
    try:
        return machine.next_step(policy)
    except ProtocolError as exc:
        return f"ProtocolError({exc})"


def check_digest(machine: LoopMachine) -> list[str]:
    """``machine.digest()``, asked first, is the hash of a fresh canonical encoding (the snapshot
    model's JSON, without the machine's caches): call it before a save refreshes them."""
    got = machine.digest()
    fresh = hashlib.sha256(machine.snapshot().model_dump_json().encode()).hexdigest()[:16]
    if got == fresh:
        return []
    return [_p(InvariantCode.DIGEST, f"digest() is {got}, a fresh encoding hashes to {fresh}")]


def check_resume(machine: LoopMachine, policy: MachinePolicy | None = None) -> list[str]:
    """Exact resume, without touching ``machine`` (beyond its derived JSON cache): its JSON is
    the snapshot model's own, sealed, and ``digest()`` hashes it; it restores (both paths) to an
    equal machine with the same digest and JSON; with a policy, two restored copies decide alike
    and asking one twice gives the same answer and leaves it as the first ask did."""
    found: list[str] = []
    text = machine.model_dump_json()
    content = machine.snapshot().model_dump_json().encode()
    if text.encode() != _sealed(content):
        found.append("model_dump_json() is not the snapshot model's JSON, sealed")
    if machine.digest() != hashlib.sha256(content).hexdigest()[:16]:
        found.append("digest() is not the hash of the snapshot model's JSON")
    try:
        first = type(machine).model_validate_json(text)
    except (ValidationError, ValueError) as exc:
        if open_tail_allowed(machine) and isinstance(machine.state, Terminal):
            message = f"a terminal machine with calls in flight: {exc}"
            return [_p(InvariantCode.RESTORE_TERMINAL_OPEN_TAIL, message)]
        return [_p(InvariantCode.RESUME, f"the snapshot does not restore: {exc}")]
    if first != machine:
        found.append("the restored machine is not equal to the original")
    if first.digest() != machine.digest():
        found.append("the digest changed across save/restore")
    if first.model_dump_json() != text:
        found.append("the snapshot is not a fixed point of save/restore")
    try:
        via_dict = type(machine).model_validate(machine.model_dump())
    except (ValidationError, ValueError) as exc:
        found.append(f"model_dump() does not restore: {exc}")
    else:
        if via_dict != machine:
            found.append("model_dump() restores to another machine")
    problems = [_p(InvariantCode.RESUME, t) for t in found]
    if policy is None:
        return problems
    second = type(machine).model_validate_json(text)
    a1 = _ask(first, policy)
    after_first = first.model_dump_json()
    a2 = _ask(second, policy)
    if a1 != a2 or after_first != second.model_dump_json():
        problems.append(
            _p(InvariantCode.RESUME, f"two restored copies decide differently: {a1!r} {a2!r}")
        )
    again = _ask(first, policy)
    if again != a1:
        problems.append(_p(InvariantCode.IDEMPOTENCE, f"asked twice: {a1!r}, then {again!r}"))
    if first.model_dump_json() != after_first:
        problems.append(_p(InvariantCode.IDEMPOTENCE, "asking again changed the machine"))
    return problems
