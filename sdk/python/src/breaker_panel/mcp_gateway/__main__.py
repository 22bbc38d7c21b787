"""`breaker-panel-mcp` / `python -m breaker_panel.mcp_gateway`: run the gateway."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import signal
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

import anyio

from breaker_panel.client import PlaneConfig
from breaker_panel.mcp_gateway.auth import BearerAuth
from breaker_panel.mcp_gateway.config import ConfigError, GatewayConfig
from breaker_panel.mcp_gateway.gateway import Gateway
from breaker_panel.mcp_gateway.plane import GatewayPlane
from breaker_panel.per_call import FleetBreakers, LocalBreakers, PerCallBreakers
from breaker_panel.worker import WorkerBreakers

TOKEN_ENV = "BREAKER_PANEL_TOKEN"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="breaker-panel-mcp",
        description="Front MCP servers with per-tool circuit breakers: broken tools leave "
        "tools/list and clients are told when the list changes (with the config's way refuse, "
        "they stay listed and their calls are refused).",
    )
    parser.add_argument("--config", required=True, help="the gateway's JSON config file")
    parser.add_argument("--http", metavar="PORT", type=int, help="serve streamable HTTP (/mcp)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind with --http")
    parser.add_argument("--control-plane", metavar="URL", help="join the fleet of this panel")
    parser.add_argument(
        "--token",
        help="agent token for --control-plane (visible in the process list: prefer --token-file)",
    )
    parser.add_argument(
        "--token-file",
        metavar="PATH",
        help=f"file holding the agent token for --control-plane (else the config's token_env, "
        f"else ${TOKEN_ENV})",
    )
    parser.add_argument(
        "--auth-token-file",
        metavar="PATH",
        help="with --http: clients must send `Authorization: Bearer <the token in this file>`",
    )
    parser.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="with --http on an address other than loopback: serve without a bearer token",
    )
    parser.add_argument("--worker-id", help="this gateway's worker id in the fleet")
    parser.add_argument(
        "--fleet-wait",
        type=float,
        default=20.0,
        help="seconds the control plane may hold a fleet request until something changes "
        "(fleet push by long-poll); 0 polls instead",
    )
    parser.add_argument(
        "--fleet-poll-interval",
        type=float,
        default=1.0,
        help="seconds between fleet polls when the control plane does not hold them",
    )
    parser.add_argument(
        "--no-passthrough",
        dest="passthrough",
        action="store_false",
        help="pass tools/call through the MCP SDK's models on both hops (slower; to compare)",
    )
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(argv)
    if args.http is not None and not 0 < args.http < 65536:
        parser.error("--http must be a port between 1 and 65535")
    if not args.fleet_poll_interval > 0:
        parser.error("--fleet-poll-interval must be above 0")
    if not args.fleet_wait >= 0:
        parser.error("--fleet-wait must be 0 or more")
    if (args.token or args.token_file) and not args.control_plane:
        parser.error("--token and --token-file need --control-plane")
    if args.token and args.token_file:
        parser.error("give --token or --token-file, not both")
    if (args.auth_token_file or args.insecure_no_auth) and args.http is None:
        parser.error("--auth-token-file and --insecure-no-auth go with --http")
    if args.auth_token_file and args.insecure_no_auth:
        parser.error("give --auth-token-file or --insecure-no-auth, not both")
    try:
        args.auth_token = _read_secret(args.auth_token_file, "--auth-token-file")
        if args.token_file:
            args.token = _read_secret(args.token_file, "--token-file")
    except ValueError as exc:
        parser.error(str(exc))
    open_to_all = args.http is not None and not args.auth_token and not args.insecure_no_auth
    if open_to_all and not _loopback(args.host):
        parser.error(
            f"--host {args.host} serves every upstream's tools to the network: give "
            "--auth-token-file (clients send it as a bearer token) or --insecure-no-auth"
        )
    return args


def _read_secret(path: str | None, option: str) -> str:
    """The token in the file at `path` (surrounding whitespace dropped); '' without a path."""
    if not path:
        return ""
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{option}: cannot read {path}: {exc}") from exc
    if not token:
        raise ValueError(f"{option}: {path} is empty")
    if any(c.isspace() for c in token):
        raise ValueError(f"{option}: the token in {path} has spaces or line breaks inside")
    return token


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name may resolve to anything


def resolve_token(config: GatewayConfig, args: argparse.Namespace) -> str:
    """The control-plane token: --token, --token-file, else the environment variable named by
    the config's `token_env` (default BREAKER_PANEL_TOKEN)."""
    if args.token:
        return str(args.token)
    return os.environ.get(config.token_env or TOKEN_ENV, "").strip()


def build_breakers(config: GatewayConfig, args: argparse.Namespace) -> PerCallBreakers:
    settings = config.breaker
    token = resolve_token(config, args) if args.control_plane else ""
    if args.control_plane and not token:
        # An MCP client starts us without its own environment unless told to: dying here
        # would leave its user with a server that "crashed". Serve, and say why no fleet.
        variable = config.token_env or TOKEN_ENV
        print(
            f"breaker-panel-mcp: warning: --control-plane {args.control_plane} given but no "
            f"agent token (no --token-file, no --token, ${variable} unset or empty; an MCP "
            f"client passes its environment only through its config's env). Serving the "
            "upstreams WITHOUT the fleet: worker-scope breakers only, nothing reported.",
            file=sys.stderr,
            flush=True,
        )
    if not token:
        worker = WorkerBreakers(
            threshold=settings.threshold,
            cooldown=settings.cooldown,
            max_cooldown=settings.max_cooldown,
        )
        return LocalBreakers(worker)
    worker_id = args.worker_id or f"mcp-gateway@{socket.gethostname()}:{os.getpid()}"
    plane = GatewayPlane(
        args.control_plane,
        token=token,
        worker_id=worker_id[:200],
        config=PlaneConfig(
            threshold=settings.threshold,
            cooldown=settings.cooldown,
            max_cooldown=settings.max_cooldown,
            fleet_poll_interval=args.fleet_poll_interval,
            fleet_wait=args.fleet_wait,
        ),
    )
    return FleetBreakers(plane, agent=config.agent)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    # stdout is the MCP channel in stdio mode: every log line goes to stderr.
    logging.basicConfig(stream=sys.stderr, level=args.log_level.upper())
    try:
        config = GatewayConfig.load(args.config)
        breakers = build_breakers(config, args)
    except (ConfigError, ValueError) as exc:
        sys.exit(f"breaker-panel-mcp: error: {exc}")
    for note in config.way_notes():
        print(f"breaker-panel-mcp: note: {note}", file=sys.stderr, flush=True)
    gateway = Gateway(config, breakers, passthrough=args.passthrough)
    if isinstance(breakers, FleetBreakers) and isinstance(breakers.plane, GatewayPlane):
        breakers.plane.on_fleet_change = gateway.wake
    if not args.http:  # uvicorn handles SIGTERM itself; on stdio, stop as on Ctrl-C and flush
        signal.signal(signal.SIGTERM, _interrupt)
    try:
        anyio.run(gateway.run, _serve_http(args) if args.http else _serve_stdio)
    except KeyboardInterrupt:
        pass
    finally:
        breakers.close()


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


async def _serve_stdio(gateway: Gateway) -> None:
    await gateway.serve_stdio()


def _serve_http(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    async def serve(gateway: Gateway) -> None:
        import uvicorn

        app = gateway.http_app(args.host)
        if args.auth_token:
            app = BearerAuth(app, args.auth_token)
        where = f"http://{args.host}:{args.http}/mcp"
        if args.auth_token:
            state = "clients must send the bearer token from --auth-token-file"
        elif args.insecure_no_auth:
            state = "WITHOUT authentication (--insecure-no-auth): anyone who can reach it may call"
        else:
            state = "without authentication (loopback only)"
        print(f"breaker-panel-mcp: serving {where}; {state}", file=sys.stderr, flush=True)
        server = uvicorn.Server(
            uvicorn.Config(app, host=args.host, port=args.http, log_level="warning")
        )
        await server.serve()

    return serve


if __name__ == "__main__":
    main()
