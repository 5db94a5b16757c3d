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


class _Policy:
    """Which hosts a block lets through; it learns the addresses of allowed names."""

    def __init__(self, allow_hosts: Iterable[str], allow_loopback: bool) -> None:
        self.hosts = {h.lower() for h in allow_hosts}
        self.loopback = allow_loopback or any(is_loopback(h) for h in self.hosts)

    def allows(self, host: str) -> bool:
        host = host.lower()
        return host in self.hosts or (self.loopback and is_loopback(host))

    def learn(self, infos: Any) -> None:
        for info in infos:
            address = info[4]
            if isinstance(address, tuple) and address:
                self.hosts.add(str(address[0]).lower())


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
    policy = _Policy(allow_hosts, allow_loopback)
    sock = socket.socket
    original_connect, original_connect_ex = sock.connect, sock.connect_ex
    original_sendto, original_sendmsg = sock.sendto, sock.sendmsg
    original_getaddrinfo, original_getnameinfo = socket.getaddrinfo, socket.getnameinfo
    original_gethostbyname, original_gethostbyaddr = socket.gethostbyname, socket.gethostbyaddr
    original_gethostbyname_ex = socket.gethostbyname_ex

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
        if not policy.allows(host):
            port = _port_of(address[1]) if len(address) > 1 else None
            raise refuse("connect to", host, port)

    def guarded_connect(self: socket.socket, address: Any) -> None:
        check(address)
        original_connect(self, address)

    def guarded_connect_ex(self: socket.socket, address: Any) -> int:
        check(address)
        return original_connect_ex(self, address)

    def guarded_sendto(self: socket.socket, data: Any, *rest: Any) -> int:
        # sendto(data, address) or sendto(data, flags, address): a datagram goes out unasked
        # for by any connect, so its address is checked here (a DNS query over UDP, too)
        check(rest[-1] if rest else None)
        return original_sendto(self, data, *rest)

    def guarded_sendmsg(self: socket.socket, *args: Any) -> int:
        # sendmsg(buffers, ancdata, flags, address): positional only
        check(args[3] if len(args) > 3 else None)
        return original_sendmsg(self, *args)

    def resolving(name: Any, port: Any = None) -> bool:
        """Whether ``name`` may be resolved (raises when not); False: this machine's name."""
        text = name.decode() if isinstance(name, bytes) else name
        if text is None or is_loopback(str(text)):
            # resolving this machine is harmless (servers bind through it); connect decides
            return False
        if not policy.allows(str(text)):
            raise refuse("resolve", str(text), _port_of(port))
        return True

    def guarded_getaddrinfo(host: Any, port: Any = None, *args: Any, **kwargs: Any) -> Any:
        remote = resolving(host, port)
        infos = original_getaddrinfo(host, port, *args, **kwargs)
        if remote:
            policy.learn(infos)
        return infos

    def guarded_gethostbyname(host: str) -> str:
        remote = resolving(host)
        address = original_gethostbyname(host)
        if remote:
            policy.hosts.add(address.lower())
        return address

    def guarded_gethostbyname_ex(host: str) -> tuple[str, list[str], list[str]]:
        remote = resolving(host)
        found = original_gethostbyname_ex(host)
        if remote:
            policy.hosts.update(a.lower() for a in found[2])
        return found

    def guarded_gethostbyaddr(address: str) -> tuple[str, list[str], list[str]]:
        resolving(address)  # the name of an address is asked of a DNS server as well
        return original_gethostbyaddr(address)

    def guarded_getnameinfo(sockaddr: Any, flags: int) -> tuple[str, str]:
        if not flags & socket.NI_NUMERICHOST and isinstance(sockaddr, tuple) and sockaddr:
            resolving(sockaddr[0], sockaddr[1] if len(sockaddr) > 1 else None)
        return original_getnameinfo(sockaddr, flags)

    guarded = {
        (sock, "connect"): guarded_connect,
        (sock, "connect_ex"): guarded_connect_ex,
        (sock, "sendto"): guarded_sendto,
        (sock, "sendmsg"): guarded_sendmsg,
        (socket, "getaddrinfo"): guarded_getaddrinfo,
        (socket, "gethostbyname"): guarded_gethostbyname,
        (socket, "gethostbyname_ex"): guarded_gethostbyname_ex,
        (socket, "gethostbyaddr"): guarded_gethostbyaddr,
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
