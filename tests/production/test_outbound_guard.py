"""Probes may not reach internal addresses unless BREAKER_HTTP_ALLOWED_NETWORKS names them."""

from __future__ import annotations

import ipaddress

import pytest
from pytest_django.fixtures import Settings

from breakers.probes.outbound_http import HttpError, address_allowed, http_request
from tests.vendor_server import VendorServer


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.5.4",
        "192.168.1.1",
        "169.254.169.254",  # cloud metadata
        "100.64.0.1",  # carrier-grade NAT
        "0.0.0.0",
        "::1",
        "fe80::1",
        "fd00::1",
        "::ffff:127.0.0.1",  # loopback written as IPv6
        "224.0.0.1",
    ],
)
def test_internal_addresses_are_refused_by_default(address: str) -> None:
    assert not address_allowed(ipaddress.ip_address(address), [])


def test_public_addresses_and_allowed_networks_pass() -> None:
    assert address_allowed(ipaddress.ip_address("93.184.215.14"), [])
    loopback = [ipaddress.ip_network("127.0.0.0/8")]
    assert address_allowed(ipaddress.ip_address("127.0.0.1"), loopback)
    assert address_allowed(ipaddress.ip_address("::ffff:127.0.0.1"), loopback)
    assert not address_allowed(ipaddress.ip_address("10.0.0.1"), loopback)


def test_a_probe_to_loopback_is_refused_without_the_allow_list(
    vendor_server: VendorServer, settings: Settings
) -> None:
    settings.BREAKER_HTTP_ALLOWED_NETWORKS = []
    with pytest.raises(HttpError, match=r"internal address 127\.0\.0\.1"):
        http_request("GET", vendor_server.url(), timeout=2)
    # A name is checked on the address it resolves to when connecting.
    with pytest.raises(HttpError, match="localhost resolves to internal address"):
        http_request("GET", vendor_server.url().replace("127.0.0.1", "localhost"), timeout=2)
    assert not vendor_server.requests


def test_a_probe_to_an_allowed_network_goes_through(
    vendor_server: VendorServer, settings: Settings
) -> None:
    settings.BREAKER_HTTP_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    assert http_request("GET", vendor_server.url(), timeout=2).status == 200
