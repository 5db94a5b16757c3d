"""A guard that makes any real network connection fail, for offline tests.

By default loopback addresses stay reachable (a test may run a local server); everything else
raises ``NetworkBlockedError``, naming the host and port, when a name or an address is resolved
(a reverse lookup is a DNS query too), a socket connects, or a datagram is sent (UDP needs no
connect), so an accidental provider call fails loudly instead of hanging or spending money.

``allow_loopback=False`` closes local servers too (a local Ollama is a model provider),
``allow_hosts`` opens named hosts (and the addresses they resolve to), ``hint`` ends the error
(how to record instead), and ``on_block`` sees every error before it is raised: a client may
turn the error into an ordinary failed run, and the pytest plugin still fails the test.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from loopctl.core import LoopctlError

_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0"})


class NetworkBlockedError(RuntimeError, LoopctlError):
    """A test tried to reach the network: ``host`` and ``port`` say where."""

    def __init__(self, message: str, host: str = "", port: int | None = None) -> None:
        super().__init__(message)
        self.host = host
        self.port = port

    @property
    def where(self) -> str:
        """``host:port`` (or the host alone when no port was given)."""
        return self.host if self.port is None else f"{self.host}:{self.port}"


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) is this machine."""
    return host in _LOOPBACK_NAMES or host.startswith("127.") or host.startswith("::ffff:127.")


def _port_of(value: Any) -> int | None:
    if isinstance(value, int):
        return value
    if isinstance(value, str | bytes) and value.isdigit():
        return int(value)
    return None


@contextmanager
def block_network(
    *,
    allow_hosts: Iterable[str] = (),
    allow_loopback: bool = True,
    hint: str = "",
    on_block: Callable[[NetworkBlockedError], None] | None = None,
) -> Iterator[None]:
    """Within the block, resolving or connecting to a host that is not allowed raises
    ``NetworkBlockedError`` (after ``on_block`` saw it); ``hint`` ends its message."""
    hosts = {h.lower() for h in allow_hosts}  # and the addresses allowed names resolve to
    loopback = allow_loopback or any(is_loopback(h) for h in hosts)

    def allows(host: str) -> bool:
        return host.lower() in hosts or (loopback and is_loopback(host.lower()))

    def learn(infos: Any) -> None:
        hosts.update(str(i[4][0]).lower() for i in infos if isinstance(i[4], tuple) and i[4])

    def refuse(verb: str, host: str, port: int | None) -> NetworkBlockedError:
        where = host if port is None else f"{host}:{port}"
        message = f"network access blocked in tests: {verb} {where}"
        error = NetworkBlockedError(f"{message}\n{hint}" if hint else message, host, port)
        if on_block is not None:
            on_block(error)
        return error

    def check(address: Any) -> None:
        if not isinstance(address, tuple) or not address:
            return  # a unix socket path is local
        host = str(address[0])
        if not allows(host):
            port = _port_of(address[1]) if len(address) > 1 else None
            raise refuse("connect to", host, port)

    def resolving(name: Any, port: Any = None) -> bool:
        """Whether ``name`` may be resolved (raises when not); False: this machine's name."""
        text = name.decode() if isinstance(name, bytes) else name
        if text is None or is_loopback(str(text)):
            # resolving this machine is harmless (servers bind through it); connect decides
            return False
        if not allows(str(text)):
            raise refuse("resolve", str(text), _port_of(port))
        return True

    def checking(method: Callable[..., Any], address: Callable[[Any], Any]) -> Callable[..., Any]:
        """A socket ``method`` that checks the address its arguments hold first."""

        def guarded(self: socket.socket, *args: Any) -> Any:
            check(address(args))
            return method(self, *args)

        return guarded

    def resolver(lookup: Callable[..., Any], learn: Callable[[Any], object]) -> Callable[..., Any]:
        """A name ``lookup`` that checks the name first; what it finds of an allowed remote name
        is allowed too (``learn``)."""

        def guarded(host: Any, *args: Any, **kwargs: Any) -> Any:
            remote = resolving(host, args[0] if args else kwargs.get("port"))
            found = lookup(host, *args, **kwargs)
            if remote:
                learn(found)
            return found

        return guarded

    def guarded_getnameinfo(sockaddr: Any, flags: int) -> tuple[str, str]:
        if not flags & socket.NI_NUMERICHOST and isinstance(sockaddr, tuple) and sockaddr:
            resolving(sockaddr[0], sockaddr[1] if len(sockaddr) > 1 else None)
        return original_getnameinfo(sockaddr, flags)

    sock, original_getnameinfo = socket.socket, socket.getnameinfo
    guarded = {
        (sock, "connect"): checking(sock.connect, lambda args: args[0] if args else None),
        (sock, "connect_ex"): checking(sock.connect_ex, lambda args: args[0] if args else None),
        # sendto(data[, flags], address): a datagram goes out unasked for by any connect (a DNS
        # query over UDP too); sendmsg(buffers, ancdata, flags, address), positional only
        (sock, "sendto"): checking(sock.sendto, lambda args: args[-1] if len(args) > 1 else None),
        (sock, "sendmsg"): checking(sock.sendmsg, lambda args: args[3] if len(args) > 3 else None),
        (socket, "getaddrinfo"): resolver(socket.getaddrinfo, learn),
        (socket, "gethostbyname"): resolver(socket.gethostbyname, lambda a: hosts.add(a.lower())),
        (socket, "gethostbyname_ex"): resolver(
            socket.gethostbyname_ex, lambda found: hosts.update(a.lower() for a in found[2])
        ),
        # the name of an address is asked of a DNS server as well
        (socket, "gethostbyaddr"): resolver(socket.gethostbyaddr, lambda found: None),
        (socket, "getnameinfo"): guarded_getnameinfo,
    }
    originals = {where: getattr(*where) for where in guarded}
    for (owner, name), replacement in guarded.items():
        setattr(owner, name, replacement)
    try:
        yield
    finally:
        for (owner, name), original in originals.items():
            setattr(owner, name, original)
