"""Half-open probes driven by real Celery workers against a real local HTTP server.

A "beat" thread sends the tick twice every 50 ms (a duplicated beat) to two worker processes;
the vendor is down, then up. Each half-open window must get exactly one probe, the breaker must
re-open with a backed-off cooldown while the vendor is down and close once it is back.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import redis

from breakers.fleet_service import fleet_record_tool_calls
from breakers.models import FleetTransition, Incident, Probe, Tool, ToolPolicy
from breakers.tasks import fleet_tick
from scripts.testing.fleet_calls import fleet_call
from scripts.testing.processes import CeleryBeatProcess, CeleryWorkerProcess
from tests.vendor_server import VendorServer
from tests.waiting import wait_for

pytestmark = pytest.mark.celery


class DuplicatedBeat:
    """Sends ``fleet_tick`` ``copies`` times every ``interval`` seconds, like two beats would."""

    def __init__(self, *, copies: int = 2, interval: float = 0.05) -> None:
        self.copies, self.interval = copies, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            for _ in range(self.copies):
                fleet_tick.delay()

    def __enter__(self) -> DuplicatedBeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


@pytest.fixture
def second_worker(celery_worker: CeleryWorkerProcess) -> Iterator[CeleryWorkerProcess]:
    worker = CeleryWorkerProcess(pool="threads", concurrency=2).start()
    yield worker
    worker.stop()  # warm shutdown: lets its running task finish


def probed_tool(vendor: VendorServer) -> Tool:
    tool = Tool.objects.create(name="web_search")
    ToolPolicy.objects.create(
        tool=tool,
        cooldown_seconds=0.3,
        max_cooldown_seconds=0.6,
        probe_kind="http",
        probe_url=vendor.url("/health"),
        probe_timeout_seconds=2,
    )
    return tool


def open_it(tool: Tool) -> None:
    calls = [fleet_call(f"e{i}", tool.name, f"w{i % 2}", "retryable") for i in range(5)]
    assert fleet_record_tool_calls(calls=calls)[0].to_state == "open"


def test_one_probe_per_window_reopens_while_down_and_closes_on_recovery(
    celery_worker: CeleryWorkerProcess,
    second_worker: CeleryWorkerProcess,
    vendor_server: VendorServer,
    fleet_redis: redis.Redis,
) -> None:
    tool = probed_tool(vendor_server)
    vendor_server.down(503)
    open_it(tool)
    with DuplicatedBeat():
        wait_for(lambda: Probe.objects.filter(tool=tool).count() >= 3, "three failed probes")
        vendor_server.up()
        wait_for(lambda: Tool.objects.get(pk=tool.pk).state == "closed", "the breaker to close")
    second_worker.wait_idle()
    celery_worker.wait_idle()

    probes = list(Probe.objects.filter(tool=tool).order_by("started_at"))
    windows = [probe.window for probe in probes]
    assert windows == sorted(set(windows)), "one probe per half-open window"
    assert len(vendor_server.requests) == len(probes), "every probe is one request, recorded"
    assert all(probe.decided for probe in probes)
    assert [probe.ok for probe in probes] == [False] * (len(probes) - 1) + [True]
    assert probes[0].error == "HTTP 503, expected 200" and probes[0].status_code == 503

    reopenings = FleetTransition.objects.filter(tool=tool, from_state="half_open", to_state="open")
    assert [t.cause["cooldown_ms"] for t in reopenings] == [600] * (len(probes) - 1)
    assert [t.probe_id for t in reopenings] == [p.pk for p in probes[:-1]]
    closing = FleetTransition.objects.get(tool=tool, to_state="closed")
    assert closing.probe_id == probes[-1].pk and closing.cause["outcome"] == "success"
    incident = Incident.objects.get(tool=tool)
    assert incident.closed_by == closing


def test_a_tool_without_a_probe_waits_half_open_for_an_agents_trial(
    celery_worker: CeleryWorkerProcess, fleet_redis: redis.Redis
) -> None:
    tool = Tool.objects.create(name="calculator")
    ToolPolicy.objects.create(tool=tool, cooldown_seconds=0.2)
    open_it(tool)
    with DuplicatedBeat():
        wait_for(lambda: Tool.objects.get(pk=tool.pk).state == "half_open", "half-open")
    celery_worker.wait_idle()
    assert not Probe.objects.exists()
    assert FleetTransition.objects.filter(tool=tool, to_state="half_open").count() == 1


def test_two_real_beats_drive_the_probes_with_the_projects_schedule(
    celery_worker: CeleryWorkerProcess, vendor_server: VendorServer, fleet_redis: redis.Redis
) -> None:
    tool = probed_tool(vendor_server)
    vendor_server.down(503)
    open_it(tool)
    with CeleryBeatProcess().start() as beat_1, CeleryBeatProcess().start() as beat_2:
        wait_for(lambda: Probe.objects.filter(tool=tool).count() >= 2, "two failed probes")
        vendor_server.up()
        wait_for(lambda: Tool.objects.get(pk=tool.pk).state == "closed", "the breaker to close")
        assert beat_1.alive and beat_2.alive
    celery_worker.wait_idle()
    windows = list(Probe.objects.filter(tool=tool).values_list("window", flat=True))
    assert len(windows) == len(set(windows)) == len(vendor_server.requests)
