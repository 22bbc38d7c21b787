"""Half-open probes: an HTTP check or a callable, each bounded by its timeout."""

from __future__ import annotations

import time

import pytest

from breakers.http import HttpError, http_request
from breakers.probes import run_callable_probe, run_http_probe
from tests.processes import free_port
from tests.vendor_server import VendorServer


def healthy() -> bool:
    return True


def unhealthy() -> bool:
    return False


def broken() -> None:
    raise ConnectionError("vendor refused the connection")


def hangs() -> None:
    time.sleep(5)  # a probe that ignores its timeout


def test_an_http_probe_is_healthy_on_the_expected_status(vendor_server: VendorServer) -> None:
    result = run_http_probe(url=vendor_server.url(), method="GET", expected_status=200, timeout=2)
    assert (result.ok, result.status_code, result.error) == (True, 200, "")
    assert vendor_server.requests[0].method == "GET"


def test_an_http_probe_fails_on_any_other_status(vendor_server: VendorServer) -> None:
    vendor_server.down(503)
    result = run_http_probe(url=vendor_server.url(), method="HEAD", expected_status=200, timeout=2)
    assert (result.ok, result.status_code) == (False, 503)
    assert result.error == "HTTP 503, expected 200"


def test_an_http_probe_fails_when_nothing_listens() -> None:
    url = f"http://127.0.0.1:{free_port()}/health"
    result = run_http_probe(url=url, method="GET", expected_status=200, timeout=2)
    assert not result.ok and result.status_code is None
    assert "Connection refused" in result.error or "ConnectionRefused" in result.error


def test_an_http_probe_gives_up_at_its_timeout(vendor_server: VendorServer) -> None:
    vendor_server.slow(3)
    started = time.monotonic()
    result = run_http_probe(url=vendor_server.url(), method="GET", expected_status=200, timeout=0.3)
    assert not result.ok and "timed out" in result.error.lower()
    assert time.monotonic() - started < 2


def test_redirects_are_an_answer_not_followed(vendor_server: VendorServer) -> None:
    vendor_server.down(302)
    assert http_request("GET", vendor_server.url(), timeout=2).status == 302


def test_only_http_urls_and_a_positive_timeout_are_accepted() -> None:
    with pytest.raises(HttpError, match="only http and https"):
        http_request("GET", "file:///etc/passwd", timeout=1)
    with pytest.raises(ValueError, match="timeout"):
        http_request("GET", "http://127.0.0.1/", timeout=0)


@pytest.mark.parametrize(
    ("path", "ok", "error"),
    [
        ("tests.fleet.test_fleet_probes.healthy", True, ""),
        ("tests.fleet.test_fleet_probes.unhealthy", False, "the probe returned False"),
        (
            "tests.fleet.test_fleet_probes.broken",
            False,
            "ConnectionError: vendor refused the connection",
        ),
        ("tests.fleet.test_fleet_probes.hangs", False, "timed out after 0.2 s"),
        ("tests.fleet.no_such_module.probe", False, "ModuleNotFoundError"),
    ],
)
def test_a_callable_probe(path: str, ok: bool, error: str) -> None:
    started = time.monotonic()
    result = run_callable_probe(path=path, timeout=0.2)
    assert result.ok is ok
    assert result.error.startswith(error)
    assert time.monotonic() - started < 2
