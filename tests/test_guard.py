from __future__ import annotations

import socket

import httpx
import pytest

from loopctl.testing import NetworkBlockedError


def test_real_connection_fails() -> None:
    with pytest.raises(NetworkBlockedError):
        socket.create_connection(("93.184.216.34", 443), timeout=1)


def test_resolving_a_host_fails() -> None:
    with pytest.raises(NetworkBlockedError):
        socket.getaddrinfo("api.openai.com", 443)


def test_httpx_request_fails() -> None:
    with pytest.raises(NetworkBlockedError):
        httpx.get("https://api.openai.com/v1/models", timeout=1)
