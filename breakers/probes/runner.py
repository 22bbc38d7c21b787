"""Half-open probes: an HTTP check or an importable callable, each bounded by its timeout.

A callable probe takes no arguments and must live under one of the dotted-path prefixes in
``BREAKER_PROBE_CALLABLE_PREFIXES`` (checked when a policy is saved and again before each call);
returning anything but ``False`` means healthy, returning ``False`` or raising means not. It runs
on a daemon thread so that a callable which ignores its timeout cannot hold the Celery worker:
the probe is recorded as timed out and the thread is left to finish on its own.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Protocol

from django.conf import settings
from django.utils.module_loading import import_string

from breakers.probes.outbound_http import HttpError, http_request

__all__ = [
    "ProbeResult",
    "ProbeSpec",
    "probe_callable_allowed",
    "run_callable_probe",
    "run_http_probe",
    "run_probe",
]

MAX_ERROR_CHARS = 500


@dataclass(frozen=True, slots=True)
class ProbeResult:
    ok: bool
    latency_ms: int
    status_code: int | None = None
    error: str = ""


class ProbeSpec(Protocol):
    """What a probe needs of a tool's policy (``breakers.models.ToolPolicy`` has it)."""

    probe_kind: str
    probe_url: str
    probe_method: str
    probe_expected_status: int
    probe_timeout_seconds: float
    probe_callable: str


def run_probe(policy: ProbeSpec) -> ProbeResult:
    if policy.probe_kind == "http":
        return run_http_probe(
            url=policy.probe_url,
            method=policy.probe_method,
            expected_status=policy.probe_expected_status,
            timeout=policy.probe_timeout_seconds,
        )
    return run_callable_probe(path=policy.probe_callable, timeout=policy.probe_timeout_seconds)


def run_http_probe(*, url: str, method: str, expected_status: int, timeout: float) -> ProbeResult:
    started = time.monotonic()
    try:
        response = http_request(method, url, timeout=timeout, max_body=1024)
    except HttpError as exc:
        return ProbeResult(False, _since(started), None, _clip(str(exc)))
    if response.status != expected_status:
        error = f"HTTP {response.status}, expected {expected_status}"
        return ProbeResult(False, response.elapsed_ms, response.status, error)
    return ProbeResult(True, response.elapsed_ms, response.status)


def probe_callable_allowed(path: str) -> bool:
    """Whether ``path`` is under one of ``BREAKER_PROBE_CALLABLE_PREFIXES``."""
    return any(
        prefix and path.startswith(prefix) for prefix in settings.BREAKER_PROBE_CALLABLE_PREFIXES
    )


def run_callable_probe(*, path: str, timeout: float) -> ProbeResult:
    started = time.monotonic()
    if not probe_callable_allowed(path):
        # Checked again here: a policy saved before the prefixes were narrowed, or written to the
        # database by hand, must not be imported nor called.
        return ProbeResult(False, 0, None, _clip(f"{path!r} is not an allowed probe callable"))
    outcome: list[object] = []

    def call() -> None:
        try:
            outcome.append(import_string(path)())
        # A probe is operator code: whatever it raises is its verdict "unhealthy", not our bug.
        except Exception as exc:  # noqa: BLE001
            outcome.append(exc)

    thread = threading.Thread(target=call, name=f"probe:{path}", daemon=True)
    thread.start()
    thread.join(timeout)
    if not outcome:
        return ProbeResult(False, _since(started), None, f"timed out after {timeout:g} s")
    result = outcome[0]
    if isinstance(result, BaseException):
        return ProbeResult(
            False, _since(started), None, _clip(f"{type(result).__name__}: {result}")
        )
    if result is False:
        return ProbeResult(False, _since(started), None, "the probe returned False")
    return ProbeResult(True, _since(started))


def _since(started: float) -> int:
    return round((time.monotonic() - started) * 1000)


def _clip(text: str) -> str:
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"
