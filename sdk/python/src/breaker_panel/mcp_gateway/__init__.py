"""A breaker gateway for MCP: `python -m breaker_panel.mcp_gateway --config gateway.json`.

It fronts upstream MCP servers (stdio or streamable HTTP), serves their tools over stdio or
streamable HTTP, leaves open tools out of `tools/list` and sends `list_changed` when that set
moves. Needs `mcp>=2.0` (the `[mcp]` extra): `gateway` refuses 1.x with a clear error. `plane`
needs no `mcp`; the per-call breakers it serves with are `breaker_panel.per_call`.
"""

from __future__ import annotations

from importlib import metadata

__all__ = ["MIN_MCP", "require_mcp"]

MIN_MCP = (2, 0)


def require_mcp() -> str:
    """The installed `mcp` version; ImportError naming the fix when it is missing or too old."""
    try:
        version = metadata.version("mcp")
    except metadata.PackageNotFoundError:
        raise ImportError(
            "breaker-panel-mcp needs the mcp package: pip install 'breaker-panel-sdk[mcp]'"
        ) from None
    major = int(version.split(".")[0]) if version.split(".")[0].isdigit() else 0
    if major < MIN_MCP[0]:
        raise ImportError(
            f"breaker-panel-mcp needs mcp>=2.0 (its lowlevel Server, mcp.Client and "
            f"subscriptions); found mcp {version}. Upgrade: pip install 'mcp>=2,<3'. "
            "guard_session() in breaker_panel.integrations.mcp works with mcp 1.x."
        )
    return version
