"""The gateway's own half-open trial, for a tool nobody calls: a configured `tools/call`.

A half-open tool's trial is the next client call. When none comes within `probe_after` seconds
of the trial falling due, and the tool's upstream config names a probe for it, the gateway
makes that call itself, as the trial: under this worker's trial lease (worker scope) and the
fleet's (fleet scope), so never two at once across gateways. Why: docs/mcp-gateway.md and the
ADR "The gateway probes a half-open tool nobody calls, under the trial lease".
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import anyio

from breaker_panel.mcp_gateway.config import GatewayConfig
from breaker_panel.mcp_gateway.passthrough import malformed
from breaker_panel.per_call import PerCallBreakers

__all__ = ["PROBE_SESSION", "Prober"]

logger = logging.getLogger("breaker_panel.mcp_gateway")

PROBE_SESSION = "probe"  # the probes' calls are one run each, apart from every client's


class _Gateway(Protocol):
    """What the prober needs of the gateway (gateway.py), which owns it."""

    config: GatewayConfig
    breakers: PerCallBreakers
    offered: frozenset[str]

    @property
    def catalog(self) -> Mapping[str, tuple[Any, str]]:
        """Exposed name -> (its Upstream, its own name)."""

    @property
    def called(self) -> Mapping[str, float]:
        """Exposed name -> when a client last called it (anyio time)."""

    async def relay(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        check: Callable[[Any], Any],
        marks: list[float] | None = None,
        *,
        session: str = ...,
    ) -> Any: ...


class Prober:
    """Watches the tools that have a probe; probes one whose trial no client made in time."""

    def __init__(self, gateway: _Gateway) -> None:
        self.gateway = gateway
        self.probes_made = 0
        # Since when each probed tool has been due its trial with no client call (monotonic).
        self._due_since: dict[str, float] = {}

    def configured(self) -> dict[str, dict[str, Any]]:
        """Exposed tool name -> the arguments of its probe call."""
        probes: dict[str, dict[str, Any]] = {}
        for exposed, (upstream, tool) in self.gateway.catalog.items():
            arguments = upstream.config.probes.get(tool)
            if arguments is not None:
                probes[exposed] = arguments
        return probes

    async def run(self) -> None:
        interval = self.gateway.config.breaker.check_interval
        while True:
            await anyio.sleep(interval)
            for name, arguments in self.configured().items():
                if self._due(name):
                    await self.probe(name, arguments)

    def _due(self, name: str) -> bool:
        """Has `name` been due its trial, with no client call of it, for `probe_after`?"""
        gateway = self.gateway
        # Offered while not closed: the trial is due and this worker may make it (it holds
        # the fleet's lease, or the fleet does not hold the tool); not offered: a call holds
        # the trial now, the cooldown runs, or another gateway has the fleet's lease.
        if name not in gateway.offered or not gateway.breakers.needs_trial(name):
            self._due_since.pop(name, None)
            return False
        now = anyio.current_time()
        since = max(self._due_since.setdefault(name, now), gateway.called.get(name, -1.0))
        return now - since >= gateway.config.probe_after

    async def probe(self, name: str, arguments: dict[str, Any]) -> None:
        """The trial call of `name` with `arguments`, recorded as any call is; its run ends."""
        self._due_since.pop(name, None)
        self.probes_made += 1
        gateway = self.gateway
        try:
            result = await gateway.relay(name, arguments, _result, session=PROBE_SESSION)
        except Exception as exc:  # noqa: BLE001 - a probe must never stop the gateway
            logger.warning("probe of %s could not be made: %s", name, exc)
            return
        finally:
            gateway.breakers.end_session(PROBE_SESSION)
        failed = isinstance(result, dict) and result.get("isError")
        logger.info("probe of %s (no client call came): %s", name, "failed" if failed else "ok")


def _result(result: Any) -> Any:
    """What a relayed call's `check` is: the result as is, or ValueError if malformed."""
    if hasattr(result, "model_dump"):  # the SDK's path (--no-passthrough): a CallToolResult
        result = result.model_dump(by_alias=True, exclude_none=True)
    problem = malformed(result)
    if problem is not None:
        raise ValueError(problem)
    return result
