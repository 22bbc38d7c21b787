"""Half-open probes: an HTTP check or a callable, each bounded by its timeout."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.core.exceptions import ValidationError

from breakers.models import ProbeKind, Tool, ToolPolicy
from breakers.probes.outbound_http import HttpError, http_request
from breakers.probes.runner import run_callable_probe, run_http_probe
from scripts.testing.processes import free_port
from tests.vendor_server import VendorServer


@pytest.fixture(autouse=True)
def allow_this_modules_probes(settings: Any) -> None:
    settings.BREAKER_PROBE_CALLABLE_PREFIXES = [
        *settings.BREAKER_PROBE_CALLABLE_PREFIXES,
        "tests.fleet.test_fleet_probes.",
        "tests.fleet.no_such_module.",
    ]


NOT_CALLABLE = 42


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


@pytest.mark.parametrize("path", ["os.abort", "breakers.probesx.run", "tests.fleetx.probe"])
def test_a_callable_outside_the_allowed_prefixes_is_never_imported_nor_called(
    path: str,
) -> None:
    result = run_callable_probe(path=path, timeout=0.2)
    assert (result.ok, result.error) == (False, f"{path!r} is not an allowed probe callable")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("os.abort", "'os.abort' is not under an allowed prefix (breakers.probes."),
        ("tests.fleet.no_such_module.probe", "cannot import 'tests.fleet.no_such_module.probe'"),
        (
            "tests.fleet.test_fleet_probes.NOT_CALLABLE",
            "'tests.fleet.test_fleet_probes.NOT_CALLABLE' is not callable",
        ),
        ("tests.fleet.test_fleet_probes.healthy", None),
    ],
)
def test_a_callable_probe_policy_is_validated_before_it_is_saved(
    path: str, message: str | None
) -> None:
    policy = ToolPolicy(
        tool=Tool.objects.create(name="calculator"),
        probe_kind=ProbeKind.CALLABLE,
        probe_callable=path,
    )
    if message is None:
        policy.full_clean()
        return
    with pytest.raises(ValidationError) as caught:
        policy.full_clean()
    assert caught.value.message_dict["probe_callable"][0].startswith(message)


@pytest.mark.django_db
def test_a_probe_module_that_raises_on_import_is_a_validation_error(
    settings: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "bp_probe_raises_on_import.py").write_text(
        "raise RuntimeError('vendor SDK not configured')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    settings.BREAKER_PROBE_CALLABLE_PREFIXES = ["bp_probe_raises_on_import."]
    policy = ToolPolicy(
        tool=Tool.objects.create(name="calculator"),
        probe_kind=ProbeKind.CALLABLE,
        probe_callable="bp_probe_raises_on_import.check",
    )
    with pytest.raises(ValidationError) as caught:
        policy.full_clean()
    assert caught.value.message_dict["probe_callable"] == [
        "cannot import 'bp_probe_raises_on_import.check': RuntimeError: vendor SDK not configured"
    ]
