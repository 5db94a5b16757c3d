"""The public surface of ``loopctl.tools``: what the driver and users import."""

from __future__ import annotations

import loopctl.tools

REQUIRED = {
    "tool",
    "Tool",
    "ToolRegistry",
    "Allow",
    "Deny",
    "Replace",
    "PreToolHook",
    "PostToolHook",
    "ToolMiddleware",
    "dispatch",
}


def test_all_names_the_promised_api_and_every_name_exists() -> None:
    assert set(loopctl.tools.__all__) >= REQUIRED
    assert sorted(loopctl.tools.__all__) == list(loopctl.tools.__all__)
    missing = [name for name in loopctl.tools.__all__ if not hasattr(loopctl.tools, name)]
    assert missing == []
