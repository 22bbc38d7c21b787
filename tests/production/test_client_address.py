"""The client address behind a proxy: one trusted-proxy list and one header, for every route
that restricts by network (``/metrics``, ``/readyz``) and for login throttling (issue 23, 8)."""

from __future__ import annotations

import pytest
import redis
from django.test import Client
from pytest_django.fixtures import Settings

pytestmark = pytest.mark.django_db

PROXY = "10.0.0.2"
INSIDE = "127.0.0.1"  # an address every network rule below allows
OUTSIDE = "203.0.113.9"
# Each header as a proxy sends it, naming ``client``.
HEADERS = {
    "X-Forwarded-For": lambda client: {"HTTP_X_FORWARDED_FOR": f"198.51.100.1, {client}"},
    "Forwarded": lambda client: {"HTTP_FORWARDED": f"for=198.51.100.1, for={client};proto=https"},
    "X-Real-IP": lambda client: {"HTTP_X_REAL_IP": client},
}


@pytest.fixture
def behind_proxy(settings: Settings, redis_client: redis.Redis) -> Settings:
    settings.TRUSTED_PROXIES = ["10.0.0.0/24"]
    settings.METRICS_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    settings.HEALTH_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    settings.METRICS_TOKEN = ""
    return settings


def _statuses(client: Client, peer: str, headers: dict[str, str]) -> tuple[int, int]:
    metrics = client.get("/metrics", REMOTE_ADDR=peer, **headers).status_code
    ready = client.get("/readyz", REMOTE_ADDR=peer, **headers).status_code
    return metrics, ready


@pytest.mark.parametrize("header", HEADERS)
def test_the_configured_header_from_a_trusted_proxy_names_the_client(
    client: Client, behind_proxy: Settings, header: str
) -> None:
    behind_proxy.CLIENT_ADDRESS_HEADER = header
    metrics, ready = _statuses(client, PROXY, HEADERS[header](INSIDE))
    assert metrics == 200
    assert ready != 403  # 200 or 503: readiness was reported
    assert _statuses(client, PROXY, HEADERS[header](OUTSIDE)) == (401, 403)


@pytest.mark.parametrize("header", HEADERS)
def test_a_forwarding_header_from_an_untrusted_peer_passes_no_network_rule(
    client: Client, behind_proxy: Settings, header: str
) -> None:
    """A proxy nobody configured (or a client naming itself inside): the peer is inside the
    networks, yet the request came from elsewhere."""
    behind_proxy.CLIENT_ADDRESS_HEADER = header
    behind_proxy.TRUSTED_PROXIES = []
    assert _statuses(client, INSIDE, HEADERS[header](OUTSIDE)) == (401, 403)
    assert _statuses(client, OUTSIDE, HEADERS[header](INSIDE)) == (401, 403)


@pytest.mark.parametrize(
    ("header", "sent"), [(header, sent) for header in HEADERS for sent in HEADERS if sent != header]
)
def test_another_forwarding_header_than_the_configured_one_passes_no_network_rule(
    client: Client, behind_proxy: Settings, header: str, sent: str
) -> None:
    behind_proxy.CLIENT_ADDRESS_HEADER = header
    behind_proxy.TRUSTED_PROXIES = ["10.0.0.0/24", "127.0.0.0/8"]
    # A proxy on loopback that sends X-Real-IP while X-Forwarded-For is configured made
    # /metrics public (issue 23): the peer alone looked like loopback.
    assert _statuses(client, INSIDE, HEADERS[sent](OUTSIDE)) == (401, 403)


def test_a_direct_request_is_judged_by_its_peer(client: Client, behind_proxy: Settings) -> None:
    assert _statuses(client, INSIDE, {})[0] == 200
    assert _statuses(client, OUTSIDE, {}) == (401, 403)


def test_forwarded_ipv6_and_ports_are_read(client: Client, behind_proxy: Settings) -> None:
    behind_proxy.CLIENT_ADDRESS_HEADER = "Forwarded"
    behind_proxy.METRICS_ALLOWED_NETWORKS = ["2001:db8::/32", "192.0.2.0/24"]
    for value in ('for="[2001:db8::17]:4711"', "for=192.0.2.60:8080;by=10.0.0.2", "For=192.0.2.1"):
        assert client.get("/metrics", REMOTE_ADDR=PROXY, HTTP_FORWARDED=value).status_code == 200
    for value in ("for=unknown", "for=_hidden", "proto=https", 'for="[2001:db8::17'):
        assert client.get("/metrics", REMOTE_ADDR=PROXY, HTTP_FORWARDED=value).status_code == 401


@pytest.mark.parametrize("header", HEADERS)
def test_login_throttling_counts_the_forwarded_client(
    client: Client, behind_proxy: Settings, header: str
) -> None:
    behind_proxy.CLIENT_ADDRESS_HEADER = header
    behind_proxy.LOGIN_MAX_FAILURES_PER_ADDRESS = 2
    guesser = HEADERS[header]("198.51.100.77")
    for n in range(2):
        login = {"username": f"guess-{n}", "password": "wrong"}
        client.post("/accounts/login/", login, REMOTE_ADDR=PROXY, **guesser)
    login = {"username": "guess-9", "password": "wrong"}
    assert client.post("/accounts/login/", login, REMOTE_ADDR=PROXY, **guesser).status_code == 429
    # Another client behind the same proxy has its own count.
    other = HEADERS[header]("198.51.100.78")
    assert client.post("/accounts/login/", login, REMOTE_ADDR=PROXY, **other).status_code == 200
