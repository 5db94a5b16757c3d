"""A guard that makes any real network connection fail, for offline tests.

Loopback addresses stay reachable (tests may run a local server); everything else raises
``NetworkBlockedError`` at connect time, naming the address, so an accidental provider call fails
loudly instead of hanging or spending money. Like pydantic-ai's ``ALLOW_MODEL_REQUESTS=False``.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["NetworkBlockedError", "block_network"]

_LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1", "0.0.0.0"}


class NetworkBlockedError(RuntimeError):
    """A test tried to reach the network."""


def _is_loopback(address: Any) -> bool:
    if isinstance(address, tuple) and address:
        host = str(address[0])
    else:
        return isinstance(address, str | bytes)  # a unix socket path is local
    return host in _LOOPBACK_NAMES or host.startswith("127.")


@contextmanager
def block_network() -> Iterator[None]:
    """Within the block, connecting a socket to a non-loopback address raises."""
    original_connect = socket.socket.connect
    original_connect_ex = socket.socket.connect_ex
    original_getaddrinfo = socket.getaddrinfo

    def guarded_connect(self: socket.socket, address: Any) -> None:
        if not _is_loopback(address):
            raise NetworkBlockedError(f"network access blocked in tests: connect to {address!r}")
        original_connect(self, address)

    def guarded_connect_ex(self: socket.socket, address: Any) -> int:
        if not _is_loopback(address):
            raise NetworkBlockedError(f"network access blocked in tests: connect to {address!r}")
        return original_connect_ex(self, address)

    def guarded_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if name is not None and name not in _LOOPBACK_NAMES and not str(name).startswith("127."):
            raise NetworkBlockedError(f"network access blocked in tests: resolve {name!r}")
        return original_getaddrinfo(host, *args, **kwargs)

    socket.socket.connect = guarded_connect  # type: ignore[method-assign,assignment]
    socket.socket.connect_ex = guarded_connect_ex  # type: ignore[method-assign,assignment]
    socket.getaddrinfo = guarded_getaddrinfo
    try:
        yield
    finally:
        socket.socket.connect = original_connect  # type: ignore[method-assign]
        socket.socket.connect_ex = original_connect_ex  # type: ignore[method-assign]
        socket.getaddrinfo = original_getaddrinfo
