"""`breaker-panel-mcp` / `python -m breaker_panel.mcp_gateway`: run the gateway."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
from collections.abc import Sequence

import anyio

from breaker_panel.client import PlaneConfig
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
        "tools/list and clients are told when the list changes.",
    )
    parser.add_argument("--config", required=True, help="the gateway's JSON config file")
    parser.add_argument("--http", metavar="PORT", type=int, help="serve streamable HTTP (/mcp)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind with --http")
    parser.add_argument("--control-plane", metavar="URL", help="join the fleet of this panel")
    parser.add_argument("--token", help=f"agent token for --control-plane (default: ${TOKEN_ENV})")
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
    args.token = args.token or os.environ.get(TOKEN_ENV, "")
    if args.control_plane and not args.token:
        parser.error(f"--control-plane needs --token or ${TOKEN_ENV}")
    if args.token and not args.control_plane:
        parser.error("--token needs --control-plane")
    return args


def build_breakers(config: GatewayConfig, args: argparse.Namespace) -> PerCallBreakers:
    settings = config.breaker
    if not args.control_plane:
        worker = WorkerBreakers(
            threshold=settings.threshold,
            cooldown=settings.cooldown,
            max_cooldown=settings.max_cooldown,
        )
        return LocalBreakers(worker)
    worker_id = args.worker_id or f"mcp-gateway@{socket.gethostname()}:{os.getpid()}"
    plane = GatewayPlane(
        args.control_plane,
        token=args.token,
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
        server = uvicorn.Server(
            uvicorn.Config(app, host=args.host, port=args.http, log_level="warning")
        )
        await server.serve()

    return serve


if __name__ == "__main__":
    main()
