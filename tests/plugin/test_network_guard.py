"""loopctl.testing.block_network's options: loopback closed, hosts opened, hints, on_block."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fake_openai import FakeOpenAI

from loopctl.testing import NetworkBlockedError, block_network


def port_of(server: FakeOpenAI) -> int:
    return int(server.url.split(":")[2].split("/")[0])


def test_loopback_stays_open_by_default(fake_openai: FakeOpenAI) -> None:
    with block_network():
        assert httpx.post(fake_openai.url + "/chat/completions", json={"messages": []}).is_success


def test_loopback_can_be_closed_and_the_error_says_where(fake_openai: FakeOpenAI) -> None:
    seen: list[NetworkBlockedError] = []
    with (
        block_network(allow_loopback=False, hint="record a cassette", on_block=seen.append),
        pytest.raises(NetworkBlockedError) as caught,
    ):
        socket.create_connection(("127.0.0.1", port_of(fake_openai)), timeout=5)
    error = caught.value
    assert (error.host, error.port, error.where) == (
        "127.0.0.1",
        port_of(fake_openai),
        f"127.0.0.1:{port_of(fake_openai)}",
    )
    assert str(error) == (
        f"network access blocked in tests: connect to {error.where}\nrecord a cassette"
    )
    assert seen == [error]
    assert fake_openai.requests == []


def test_resolving_this_machine_is_allowed_when_connecting_is_not() -> None:
    with block_network(allow_loopback=False):
        assert socket.getaddrinfo("localhost", 80)  # a server binds through it
        with pytest.raises(NetworkBlockedError, match=r"resolve api\.openai\.com:443"):
            socket.getaddrinfo("api.openai.com", 443)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_a_named_loopback_host_opens_loopback(fake_openai: FakeOpenAI, host: str) -> None:
    with block_network(allow_loopback=False, allow_hosts=[host]):
        socket.create_connection(("127.0.0.1", port_of(fake_openai)), timeout=5).close()


@pytest.fixture
def fake_dns(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """socket.getaddrinfo and connect replaced (before the guard wraps them) by fakes that
    resolve every name to 203.0.113.7 and record connections, so no packet leaves."""
    connected: list[Any] = []

    def resolve(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("203.0.113.7", port))]

    def connect(self: socket.socket, address: Any) -> None:
        connected.append(address)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    monkeypatch.setattr(socket.socket, "connect", connect)
    yield connected


def test_an_allowed_name_opens_the_addresses_it_resolves_to(fake_dns: list[Any]) -> None:
    with block_network(allow_hosts=["models.internal"]):
        (info,) = socket.getaddrinfo("models.internal", 443)
        with socket.socket() as sock:
            sock.connect(info[4])
            with pytest.raises(NetworkBlockedError, match=r"connect to 203\.0\.113\.8:443"):
                sock.connect(("203.0.113.8", 443))
        with pytest.raises(NetworkBlockedError, match=r"resolve other\.internal:443"):
            socket.getaddrinfo("other.internal", 443)
    assert fake_dns == [("203.0.113.7", 443)]


def test_the_guard_is_lifted_when_the_block_ends() -> None:
    before = (socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo)
    with block_network(allow_loopback=False):
        assert socket.getaddrinfo is not before[2]
    assert (socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo) == before


def test_a_unix_socket_is_local(tmp_path: Any) -> None:
    with (
        block_network(allow_loopback=False),
        socket.socket(socket.AF_UNIX) as sock,
        pytest.raises(FileNotFoundError),
    ):
        sock.connect(str(tmp_path / "absent.sock"))
