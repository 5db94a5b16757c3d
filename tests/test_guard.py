from __future__ import annotations

import socket

import httpx
import pytest

from loopctl.testing import NetworkBlockedError, block_network


def test_real_connection_fails() -> None:
    with pytest.raises(NetworkBlockedError):
        socket.create_connection(("93.184.216.34", 443), timeout=1)


def test_resolving_a_host_fails() -> None:
    with pytest.raises(NetworkBlockedError):
        socket.getaddrinfo("api.openai.com", 443)


def test_httpx_request_fails() -> None:
    with pytest.raises(NetworkBlockedError):
        httpx.get("https://api.openai.com/v1/models", timeout=1)


def test_a_udp_datagram_to_a_remote_host_fails() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        with pytest.raises(NetworkBlockedError) as caught:
            sock.sendto(b"\x00", ("8.8.8.8", 53))
        assert caught.value.where == "8.8.8.8:53"
        with pytest.raises(NetworkBlockedError):
            sock.sendto(b"\x00", 0, ("8.8.8.8", 53))  # the form with flags
        with pytest.raises(NetworkBlockedError):
            sock.sendmsg([b"\x00"], [], 0, ("8.8.8.8", 53))
        with pytest.raises(NetworkBlockedError):
            sock.connect(("8.8.8.8", 53))  # a connected UDP socket is checked at connect


def test_gethostbyname_of_a_remote_host_fails() -> None:
    with pytest.raises(NetworkBlockedError) as caught:
        socket.gethostbyname("api.openai.com")
    assert caught.value.host == "api.openai.com"
    with pytest.raises(NetworkBlockedError):
        socket.gethostbyname_ex("api.anthropic.com")


def test_a_reverse_lookup_of_a_remote_address_fails() -> None:
    # gethostbyaddr and getnameinfo ask a DNS server for the address's name: a datagram out
    with pytest.raises(NetworkBlockedError) as caught:
        socket.gethostbyaddr("8.8.8.8")
    assert caught.value.host == "8.8.8.8"
    with pytest.raises(NetworkBlockedError) as caught:
        socket.getnameinfo(("1.1.1.1", 443), 0)
    assert caught.value.where == "1.1.1.1:443"
    # the numeric form asks nobody; this machine's own address is not a remote lookup
    numeric = socket.NI_NUMERICHOST | socket.NI_NUMERICSERV
    assert socket.getnameinfo(("8.8.8.8", 53), numeric) == ("8.8.8.8", "53")
    assert "127.0.0.1" in socket.gethostbyaddr("127.0.0.1")[2]


def test_the_reverse_lookups_are_put_back() -> None:
    before = (socket.gethostbyaddr, socket.getnameinfo)
    with block_network():
        assert socket.gethostbyaddr is not before[0] and socket.getnameinfo is not before[1]
    assert (socket.gethostbyaddr, socket.getnameinfo) == before


def test_loopback_datagrams_and_names_still_work() -> None:
    assert socket.gethostbyname("localhost").startswith("127.")
    assert socket.gethostbyname("127.0.0.1") == "127.0.0.1"
    assert socket.gethostbyname_ex("127.0.0.1")[2] == ["127.0.0.1"]
    with (
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as receiver,
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender,
    ):
        receiver.bind(("127.0.0.1", 0))
        receiver.settimeout(10)
        address = receiver.getsockname()
        assert sender.sendto(b"ping", address) == 4
        assert sender.sendmsg([b"pong"], [], 0, address) == 4
        assert receiver.recvfrom(16)[0] == b"ping"
        assert receiver.recvfrom(16)[0] == b"pong"


def test_closing_loopback_closes_local_datagrams_and_allow_hosts_reopens_them() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as receiver:
        receiver.bind(("127.0.0.1", 0))
        receiver.settimeout(10)
        address = receiver.getsockname()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
            with block_network(allow_loopback=False), pytest.raises(NetworkBlockedError):
                sender.sendto(b"x", address)
            with block_network(allow_loopback=False, allow_hosts=["127.0.0.1"]):
                assert sender.sendto(b"y", address) == 1
        assert receiver.recvfrom(16)[0] == b"y"


def test_the_guard_puts_every_function_back() -> None:
    before = (
        socket.socket.sendto,
        socket.socket.sendmsg,
        socket.gethostbyname,
        socket.gethostbyname_ex,
        socket.getaddrinfo,
        socket.socket.connect,
    )
    with block_network():
        assert socket.gethostbyname is not before[2]
    after = (
        socket.socket.sendto,
        socket.socket.sendmsg,
        socket.gethostbyname,
        socket.gethostbyname_ex,
        socket.getaddrinfo,
        socket.socket.connect,
    )
    assert after == before
