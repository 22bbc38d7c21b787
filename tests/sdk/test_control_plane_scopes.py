"""PlaneConfig(scopes=...): which breakers may remove a tool from a ControlPlane's runs.

No server is needed: the plane is built without its background threads (``start=False``) and
fed fleet snapshots the way its poll thread would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import pytest

from breaker_panel import ControlPlane, PlaneConfig, Scope, ToolFailure
from breaker_panel.toolsets import tool_name
from tests.sdk.support import FakeClock, chat_tools

TOOLS = chat_tools("web_search", "calculator")
DOWN = ToolFailure("503 from vendor", retryable=True)
MakePlane = Callable[[Iterable[str]], ControlPlane]
FLEET_OPEN = {"version": 7, "tools": {"web_search": {"state": "open", "reason": "5 failures"}}}


@pytest.fixture
def make_plane(clock: FakeClock) -> Iterator[MakePlane]:
    planes: list[ControlPlane] = []

    def make(scopes: Iterable[str]) -> ControlPlane:
        plane = ControlPlane(
            "http://127.0.0.1:9",
            token="t",
            worker_id="w",
            config=PlaneConfig(scopes=scopes),
            clock=clock,
            start=False,
        )
        planes.append(plane)
        return plane

    yield make
    for plane in planes:
        plane.close(timeout=0)


def offered(tools: list[dict[str, object]]) -> list[str | None]:
    return [tool_name(tool) for tool in tools]


def test_every_scope_is_on_by_default() -> None:
    plane = ControlPlane("http://127.0.0.1:9", token="t", worker_id="w", start=False)
    assert plane.scopes == {Scope.RUN, Scope.WORKER, Scope.FLEET}


def test_without_run_scope_a_run_never_removes_a_tool_itself(make_plane: MakePlane) -> None:
    plane = make_plane(["fleet"])
    run = plane.start_run(agent="research", step_budget=20)
    for _ in range(12):
        run.record_failure("web_search", DOWN)
    assert offered(run.available(TOOLS)) == ["web_search", "calculator"]
    assert run.removals() == {}


def test_without_run_scope_the_worker_still_removes_it(make_plane: MakePlane) -> None:
    plane = make_plane(["worker", "fleet"])
    run = plane.start_run(agent="research")
    for _ in range(5):
        run.record_failure("web_search", DOWN)
    assert offered(run.available(TOOLS)) == ["calculator"]
    assert run.removals()["web_search"].scope is Scope.WORKER


def test_without_fleet_scope_the_fleet_state_is_ignored(make_plane: MakePlane) -> None:
    plane = make_plane(["run", "worker"])
    run = plane.start_run(agent="research")
    plane.update_fleet(FLEET_OPEN)
    assert plane.fleet.snapshot()["web_search"].state == "open"  # still heard, not obeyed
    assert offered(run.available(TOOLS)) == ["web_search", "calculator"]
    assert offered(plane.start_run(agent="research").available(TOOLS)) == [
        "web_search",
        "calculator",
    ]


def test_with_fleet_scope_the_fleet_state_removes_it(make_plane: MakePlane) -> None:
    plane = make_plane(["fleet"])
    run = plane.start_run(agent="research")
    plane.update_fleet(FLEET_OPEN)
    assert offered(run.available(TOOLS)) == ["calculator"]
    assert run.removals()["web_search"].scope is Scope.FLEET


@pytest.mark.parametrize("scopes", [["run", "planet"], ["Fleet"], [""]])
def test_an_unknown_scope_is_a_value_error(scopes: list[str]) -> None:
    with pytest.raises(ValueError, match="scopes must be among"):
        ControlPlane(
            "http://127.0.0.1:9",
            token="t",
            worker_id="w",
            config=PlaneConfig(scopes=scopes),
            start=False,
        )


def test_a_config_names_its_scopes_in_one_order_whatever_collection_it_was_given() -> None:
    given = PlaneConfig(scopes=(name for name in ["fleet", "run", "fleet"]))
    assert given.scopes == ("run", "fleet")
    assert given == PlaneConfig(scopes={"run", "fleet"})
    assert PlaneConfig().scopes == ("run", "worker", "fleet")


def test_a_single_scope_name_is_not_taken_for_a_collection_of_letters() -> None:
    with pytest.raises(ValueError, match="a collection of scope names"):
        PlaneConfig(scopes="fleet")
