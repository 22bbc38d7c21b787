"""The Python runner of sdk/conformance/ (its README is the contract): loading and checking the
case files, the matcher of expected JSON, and the SDK side of every case. No Django here: the
control plane's side is tests/fleet/test_conformance_protocol.py.
"""

from __future__ import annotations

import copy
import json
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

import jsonschema

from breaker_panel import (
    ControlPlane,
    DegradedResult,
    PlaneConfig,
    RunBreakers,
    StepBudgetWarning,
    ToolBreaker,
    ToolFailure,
    WorkerBreakers,
)
from breaker_panel.core import step_budget_fraction
from breaker_panel.notice import SemanticStrike
from breaker_panel.ways import Toolset
from tests.sdk.support import FakeClock

ROOT = Path(__file__).resolve().parents[1] / "sdk" / "conformance"
SCHEMA = json.loads((ROOT / "case.schema.json").read_text())
# Which definition of the schema each file is held to.
KINDS = {"breaker": "breakerFile", "protocol/events.json": "eventsFile"}
FIRST_RUN = "r1"


class CaseError(AssertionError):
    """A case the runner cannot interpret, or whose expectation failed: the test fails."""


# -- the files -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    file: str  # relative to sdk/conformance
    index: int
    data: dict[str, Any]

    @property
    def id(self) -> str:
        return f"{self.file}#{self.index}"


def kind_of(relative: str) -> str:
    if relative.startswith("breaker/"):
        return "breakerFile"
    return KINDS.get(relative, "exchangesFile")


def case_files() -> list[str]:
    return sorted(
        str(path.relative_to(ROOT))
        for path in ROOT.rglob("*.json")
        if path != ROOT / "case.schema.json"
    )


def load(relative: str) -> list[Case]:
    """The cases of one file, checked against its schema first: an unknown key is an error."""
    data = json.loads((ROOT / relative).read_text())
    schema = {"$ref": f"#/$defs/{kind_of(relative)}", "$defs": SCHEMA["$defs"]}
    jsonschema.Draft202012Validator(schema).validate(data)
    return [Case(relative, index, case) for index, case in enumerate(data)]


def cases(prefix: str) -> list[Case]:
    return [case for name in case_files() if name.startswith(prefix) for case in load(name)]


# -- matching expected JSON ------------------------------------------------------------------

JSON_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
}


class Matcher:
    """Expected JSON against actual JSON (README, "Matching"): objects are subsets, arrays are
    ordered and of the same length, scalars equal (a boolean is never a number), and an object
    whose one key starts with `$` is a matcher. `$run` labels bind to the run ids they meet."""

    def __init__(self, *, counts: dict[str, int] | None = None) -> None:
        self.runs: dict[str, Any] = {}
        self.counts = counts or {}

    def check(self, expected: Any, actual: Any, where: str = "$") -> None:
        problem = self.problem(expected, actual, where)
        if problem:
            raise CaseError(problem)

    def problem(self, expected: Any, actual: Any, where: str) -> str | None:
        if (
            isinstance(expected, dict)
            and len(expected) == 1
            and next(iter(expected)).startswith("$")
        ):
            return self._special(next(iter(expected)), next(iter(expected.values())), actual, where)
        if isinstance(expected, dict):
            if not isinstance(actual, dict):
                return f"{where}: expected an object, got {actual!r:.200}"
            for key, value in expected.items():
                if value == {"$absent": True}:
                    if actual.get(key) is not None:
                        return f"{where}.{key}: expected absent or null, got {actual[key]!r:.200}"
                    continue
                if key not in actual:
                    return f"{where}: no {key!r} in {actual!r:.300}"
                problem = self.problem(value, actual[key], f"{where}.{key}")
                if problem:
                    return problem
            return None
        if isinstance(expected, list):
            if not isinstance(actual, list) or len(actual) != len(expected):
                return f"{where}: expected {len(expected)} items, got {actual!r:.300}"
            for index, (value, item) in enumerate(zip(expected, actual, strict=True)):
                problem = self.problem(value, item, f"{where}[{index}]")
                if problem:
                    return problem
            return None
        if isinstance(expected, bool) != isinstance(actual, bool) or expected != actual:
            return f"{where}: expected {expected!r}, got {actual!r:.200}"
        return None

    def _special(self, name: str, argument: Any, actual: Any, where: str) -> str | None:
        if name == "$type":
            ok = JSON_TYPES[argument](actual)
            return None if ok else f"{where}: expected a {argument}, got {actual!r:.200}"
        if name == "$contains":
            ok = isinstance(actual, str) and argument in actual
            return (
                None
                if ok
                else f"{where}: expected text containing {argument!r}, got {actual!r:.200}"
            )
        if name == "$absent":
            return None if actual is None else f"{where}: expected absent or null, got {actual!r}"
        if name == "$count":
            return self.problem(self.counts[argument], actual, where)
        if name == "$run":
            if not isinstance(actual, str) or not actual:
                return f"{where}: expected a run id, got {actual!r}"
            bound = self.runs.get(argument)
            if bound is None:
                if actual in self.runs.values():
                    return f"{where}: run {argument!r} has the id of another run ({actual!r})"
                self.runs[argument] = actual
                return None
            return (
                None
                if bound == actual
                else f"{where}: run {argument!r} is {bound!r}, got {actual!r}"
            )
        raise CaseError(f"{where}: unknown matcher {name!r}")

    def check_unordered(self, expected: list[Any], actual: list[Any], where: str) -> None:
        """Every expected item matches a different actual item, and nothing is left over;
        `$run` bindings are tried and undone as the search backtracks."""
        if len(expected) != len(actual):
            raise CaseError(
                f"{where}: expected {len(expected)} items, got {len(actual)}: {actual!r:.2000}"
            )
        if not self._assign(expected, actual, 0, set()):
            raise CaseError(
                f"{where}: no one-to-one match of {expected!r:.1500} in {actual!r:.2000}"
            )

    def _assign(self, expected: list[Any], actual: list[Any], index: int, used: set[int]) -> bool:
        if index == len(expected):
            return True
        for position, item in enumerate(actual):
            if position in used:
                continue
            saved = dict(self.runs)
            if self.problem(expected[index], item, "") is None and self._assign(
                expected, actual, index + 1, used | {position}
            ):
                return True
            self.runs = saved
        return False


# -- the SDK under test ----------------------------------------------------------------------


def failure_of(step: dict[str, Any]) -> ToolFailure:
    outcome = step["outcome"]
    if outcome not in ("retryable", "semantic", "degraded"):
        raise CaseError(f"a failure's outcome is retryable, semantic or degraded, got {outcome!r}")
    if outcome == "degraded":  # a result check's reason, counted like a retryable failure
        return DegradedResult(step["error"], check="conformance")
    return ToolFailure(
        step["error"], retryable=outcome == "retryable", attempts=step.get("attempts", 1)
    )


class Target:
    """One way of holding the rules in the Python SDK; the case's steps are played against it."""

    name = ""
    config_keys: frozenset[str] = frozenset()

    def __init__(self, config: dict[str, Any], clock: FakeClock) -> None:
        self.config = config
        self.clock = clock
        self.warned: dict[str, bool] = {}

    # actions
    def start_run(self, label: str, step_budget: int | None) -> None:
        raise CaseError(f"{self.name}: this scope has one run")

    def finish_run(self, label: str) -> None:
        raise CaseError(f"{self.name}: this scope has one run")

    def success(self, label: str, tool: str) -> None:
        self.breakers(label).record_success(tool)

    def failure(self, label: str, tool: str, failure: ToolFailure) -> None:
        self.breakers(label).record_failure(tool, failure)

    def blocked(self, label: str, tool: str) -> None:
        """A call refused locally: nothing is recorded on a breaker without a reporting client."""

    def available(self, label: str, tools: list[Any]) -> list[Any]:
        return list(self.breakers(label).available(tools))

    def toolset(self, label: str, tools: list[Any], way: str | None, tool_choice: Any) -> Toolset:
        return self.breakers(label).toolset(tools, way=way, tool_choice=tool_choice)

    def refusal(self, label: str, tool: str) -> str | None:
        return self.breakers(label).refusal(tool)

    def fleet(self, body: dict[str, Any], source: str) -> None:
        raise CaseError(f"{self.name}: no fleet scope")

    # reads
    def breakers(self, label: str) -> Any:
        raise NotImplementedError

    def run_breaker(self, label: str) -> ToolBreaker:
        raise NotImplementedError

    def scope_breaker(self) -> ToolBreaker | WorkerBreakers:
        raise NotImplementedError

    def removed(self, label: str) -> set[str]:
        return set(self.breakers(label).removals())

    def strikes(self, label: str) -> list[SemanticStrike]:
        removed = self.removed(label)
        return [s for s in self.run_breaker(label).semantic_strikes() if s.tool not in removed]

    def _created(self, label: str, make: Callable[[], Any]) -> Any:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            made = make()
        self.warned[label] = any(issubclass(w.category, StepBudgetWarning) for w in caught)
        return made


class RunScope(Target):
    name = "ToolBreaker"
    config_keys = frozenset({"threshold", "semantic_cap", "step_budget"})

    def __init__(self, config: dict[str, Any], clock: FakeClock) -> None:
        super().__init__(config, clock)
        self.breaker: ToolBreaker = self._created(
            FIRST_RUN,
            lambda: ToolBreaker(
                config.get("threshold"),
                semantic_cap=config.get("semantic_cap"),
                step_budget=config.get("step_budget"),
                clock=clock,
            ),
        )

    def breakers(self, label: str) -> ToolBreaker:
        if label != FIRST_RUN:
            raise CaseError(f"run scope has one run, {FIRST_RUN!r}, not {label!r}")
        return self.breaker

    def run_breaker(self, label: str) -> ToolBreaker:
        return self.breakers(label)

    def scope_breaker(self) -> ToolBreaker:
        return self.breaker


class WorkerScope(Target):
    name = "WorkerBreakers"
    config_keys = frozenset({"threshold", "cooldown", "max_cooldown", "step_budget"})

    def __init__(self, config: dict[str, Any], clock: FakeClock) -> None:
        super().__init__(config, clock)
        settings = {k: config[k] for k in ("threshold", "cooldown", "max_cooldown") if k in config}
        self.worker = WorkerBreakers(clock=clock, **settings)
        self.runs: dict[str, RunBreakers] = {}
        self.start_run(FIRST_RUN, config.get("step_budget"))

    def start_run(self, label: str, step_budget: int | None) -> None:
        if label in self.runs:
            raise CaseError(f"run {label!r} was started already")
        self.runs[label] = self._created(
            label, lambda: self.worker.start_run(step_budget=step_budget)
        )

    def finish_run(self, label: str) -> None:
        self.breakers(label).close()

    def breakers(self, label: str) -> RunBreakers:
        if label not in self.runs:
            raise CaseError(f"no run {label!r}: start it first")
        return self.runs[label]

    def run_breaker(self, label: str) -> ToolBreaker:
        return self.breakers(label).run

    def scope_breaker(self) -> WorkerBreakers:
        return self.worker


class PlaneScope(Target):
    """A ControlPlane with its threads off: run, worker and fleet scope, and the events."""

    name = "ControlPlane"
    config_keys = frozenset({"threshold", "cooldown", "max_cooldown", "step_budget"})

    def __init__(self, config: dict[str, Any], clock: FakeClock, *, scope: str = "worker") -> None:
        super().__init__(config, clock)
        self.scope = scope
        settings = {k: config[k] for k in ("threshold", "cooldown", "max_cooldown") if k in config}
        self.plane = ControlPlane(
            "http://127.0.0.1:9",
            token="conformance",
            worker_id=config.get("worker_id", "w-conformance"),
            config=PlaneConfig(**settings),
            clock=clock,
            start=False,
        )
        self.runs: dict[str, Any] = {}
        if "no_first_run" not in config:
            self.start_run(FIRST_RUN, config.get("step_budget"))

    def start_run(self, label: str, step_budget: int | None, agent: str = "conformance") -> None:
        if label in self.runs:
            raise CaseError(f"run {label!r} was started already")
        if self.scope == "run" and label != FIRST_RUN:
            raise CaseError(f"run scope has one run, {FIRST_RUN!r}, not {label!r}")
        self.runs[label] = self._created(
            label, lambda: self.plane.start_run(agent=agent, step_budget=step_budget)
        )

    def finish_run(self, label: str, status: str = "completed") -> None:
        self.run(label).finish(status=status)

    def run(self, label: str) -> Any:
        if label not in self.runs:
            raise CaseError(f"no run {label!r}: start it first")
        return self.runs[label]

    def success(self, label: str, tool: str, duration_ms: int | None = None) -> None:
        self.run(label).record_success(tool, duration_ms=duration_ms)

    def failure(
        self, label: str, tool: str, failure: ToolFailure, duration_ms: int | None = None
    ) -> None:
        self.run(label).record_failure(tool, failure, duration_ms=duration_ms)

    def blocked(self, label: str, tool: str) -> None:
        self.run(label).record_blocked(tool)

    def available(self, label: str, tools: list[Any]) -> list[Any]:
        return list(self.run(label).available(tools))

    def toolset(self, label: str, tools: list[Any], way: str | None, tool_choice: Any) -> Toolset:
        return self.run(label).toolset(tools, way=way, tool_choice=tool_choice)

    def refusal(self, label: str, tool: str) -> str | None:
        return self.run(label).refusal(tool)  # records the blocked call

    def fleet(self, body: dict[str, Any], source: str) -> None:
        # A poll's answer is the fleet's word even when its version went back (after a rebuild);
        # a batch reply older than what is held is a reply that overtook a newer one.
        self.plane.update_fleet(body, authoritative=source == "poll")

    def breakers(self, label: str) -> RunBreakers:
        return self.run(label).breakers

    def run_breaker(self, label: str) -> ToolBreaker:
        return self.breakers(label).run

    def scope_breaker(self) -> ToolBreaker | WorkerBreakers:
        return self.run_breaker(FIRST_RUN) if self.scope == "run" else self.plane.worker

    def close(self) -> None:
        self.plane.close(timeout=0)


def targets_for(scope: str) -> list[Callable[[dict[str, Any], FakeClock], Target]]:
    if scope == "run":
        return [RunScope, lambda config, clock: PlaneScope(config, clock, scope="run")]
    if scope == "worker":
        return [WorkerScope, PlaneScope]
    if scope == "fleet":
        return [lambda config, clock: PlaneScope(config, clock, scope="fleet")]
    raise CaseError(f"unknown scope {scope!r}")


# -- playing a breaker case ------------------------------------------------------------------


def play_breaker_case(case: dict[str, Any]) -> list[str]:
    """Play `case` against every target of its scope that takes its config; the names of those
    that ran (at least one, or the case fails)."""
    ran = []
    config = case.get("config", {})
    for make in targets_for(case["scope"]):
        target = make(config, FakeClock())
        try:
            if not set(config) <= target.config_keys:
                continue  # e.g. semantic_cap: the ControlPlane's runs use the default
            for number, step in enumerate(case["steps"]):
                try:
                    play_step(target, case, step)
                except CaseError as exc:
                    raise CaseError(f"{target.name}, step {number} {step!r:.300}: {exc}") from exc
            ran.append(target.name)
        finally:
            if isinstance(target, PlaneScope):
                target.close()
    if not ran:
        raise CaseError(f"no target takes the config {config!r}")
    return ran


def play_step(target: Target, case: dict[str, Any], step: dict[str, Any]) -> None:
    label = step.get("run", FIRST_RUN)
    if "do" not in step:
        check_expectations(target, case, label, step["expect"])
        return
    action = step["do"]
    for _ in range(step.get("times", 1)):
        if action == "start_run":
            target.start_run(step["run"], step.get("step_budget"))
        elif action == "finish_run":
            target.finish_run(label)
        elif action == "success":
            target.success(label, step["tool"])
        elif action == "failure":
            target.failure(label, step["tool"], failure_of(step))
        elif action == "blocked":
            target.blocked(label, step["tool"])
        elif action == "advance":
            target.clock.advance(step["seconds"])
        elif action == "available":
            check_available(target, label, step.get("tools", case["tools"]), step["expect"])
        elif action == "fleet":
            target.fleet(step["body"], step["source"])
        elif action == "toolset":
            check_toolset(target, label, step, step.get("tools", case["tools"]))
        elif action == "call":
            check_call(target, label, step["tool"], step["expect"])
        else:
            raise CaseError(f"unknown action {action!r}")


def check_available(target: Target, label: str, tools: list[Any], expected: list[Any]) -> None:
    before = copy.deepcopy(tools)
    got = target.available(label, tools)
    if got != expected:
        raise CaseError(f"available() gave {got!r:.600}, expected {expected!r:.600}")
    if tools != before:
        raise CaseError("available() changed the tools array it was given")


def check_toolset(target: Target, label: str, step: dict[str, Any], tools: list[Any]) -> None:
    """`toolset()`: the array to send, the way applied, the tool_choice and the hidden tools."""
    before = copy.deepcopy(tools)
    got = target.toolset(label, tools, step.get("way"), step.get("tool_choice"))
    expect = step["expect"]
    actual = {
        "tools": got.tools,
        "way": got.way.value,
        "tool_choice": got.tool_choice,
        "hidden": sorted(got.hidden),
        "fallback": got.fallback is not None,
    }
    wanted = {"tool_choice": None, **expect}
    if "hidden" in wanted:
        wanted["hidden"] = sorted(wanted["hidden"])
    for key, value in wanted.items():
        if actual[key] != value:
            raise CaseError(f"toolset() {key}: got {actual[key]!r:.600}, expected {value!r:.600}")
    mine = iter(tools)  # what is sent is the caller's own objects, in order
    if got.way.value != "remove" and not all(any(t is m for m in mine) for t in got.tools):
        raise CaseError("toolset() must send the caller's own tool objects when it keeps them")
    if tools != before:
        raise CaseError("toolset() changed the tools array it was given")


def check_call(target: Target, label: str, tool: str, expected: str) -> None:
    """A model's call of `tool`: refused at once with the notice, or allowed to go on."""
    text = target.refusal(label, tool)
    got = "allowed" if text is None else "refused"
    if got != expected:
        raise CaseError(f"a call of {tool!r} was {got}, expected {expected}")
    if text is not None and tool not in text:
        raise CaseError(f"the refusal must be the notice naming {tool!r}, got {text!r:.300}")


def check_expectations(
    target: Target, case: dict[str, Any], label: str, expect: dict[str, Any]
) -> None:
    for key, value in expect.items():
        check = EXPECTATIONS.get(key)
        if check is None:
            raise CaseError(f"unknown expectation {key!r}")
        check(target, case, label, value)


def _per_tool(read: Callable[[Target, str], Any]) -> Callable[..., None]:
    def check(target: Target, case: dict[str, Any], label: str, expected: dict[str, Any]) -> None:
        got = {tool: read(target, tool) for tool in expected}
        got = {
            tool: value.value if hasattr(value, "value") else value for tool, value in got.items()
        }
        if got != expected:
            raise CaseError(f"expected {expected!r}, got {got!r}")

    return check


def _scoped(method: str) -> Callable[[Target, str], Any]:
    def read(target: Target, tool: str) -> Any:
        breaker = target.scope_breaker()
        if method == "cooldown" and not isinstance(breaker, WorkerBreakers):
            raise CaseError("a cooldown is a worker breaker's: run scope never recovers")
        return getattr(breaker, method)(tool)

    return read


def _removed(target: Target, case: dict[str, Any], label: str, expected: list[str]) -> None:
    got = sorted(target.removed(label))
    if got != sorted(expected):
        raise CaseError(f"run {label!r} has lost {got}, expected {sorted(expected)}")


def _notice(
    target: Target, case: dict[str, Any], label: str, expected: dict[str, Any] | None
) -> None:
    text = target.breakers(label).notice()
    if expected is None:
        if text is not None:
            raise CaseError(f"expected no notice, got {text!r}")
        return
    if text is None:
        raise CaseError("expected a notice, got none")
    if "unavailable" in expected:
        _removed(target, case, label, list(expected["unavailable"]))
        for tool, mentions in expected["unavailable"].items():
            _mentions(text, [tool, *mentions])
    if "semantic" in expected:
        got = {s.tool: s.count for s in target.strikes(label)}
        want = {tool: value["count"] for tool, value in expected["semantic"].items()}
        if got != want:
            raise CaseError(f"semantic strikes {got}, expected {want}")
        for tool, value in expected["semantic"].items():
            _mentions(text, [tool, str(value["count"]), *value["mentions"]])
    for absent in expected.get("absent", ()):
        if absent in text:
            raise CaseError(f"the notice must not contain {absent!r}: {text!r}")


def _mentions(text: str, needles: list[str]) -> None:
    for needle in needles:
        if needle not in text:
            raise CaseError(f"the notice does not mention {needle!r}: {text!r}")


def _budget_warning(target: Target, case: dict[str, Any], label: str, expected: bool) -> None:
    flagged = target.run_breaker(label).budget_warning
    if (flagged, target.warned.get(label)) != (expected, expected):
        raise CaseError(f"budget warning flagged {flagged}, warned {target.warned.get(label)}")


def _budget_fraction(target: Target, case: dict[str, Any], label: str, expected: str) -> None:
    config = case.get("config", {})
    threshold = config.get("threshold", ToolBreaker.THRESHOLD)
    got = step_budget_fraction(threshold, config["step_budget"])
    if got != Fraction(expected):
        raise CaseError(f"fraction {got}, expected {expected}")


EXPECTATIONS: dict[str, Callable[..., None]] = {
    "state": _per_tool(_scoped("state")),
    "consecutive": _per_tool(_scoped("consecutive")),
    "cooldown": _per_tool(_scoped("cooldown")),
    "removed": _removed,
    "notice": _notice,
    "budget_warning": _budget_warning,
    "budget_fraction": _budget_fraction,
}


# -- the events an SDK sends -----------------------------------------------------------------


def build_batch(case: dict[str, Any]) -> dict[str, Any]:
    """Play an events case on a ControlPlane (threads off) and return the batch it would send."""
    target = PlaneScope({"worker_id": case["worker_id"], "no_first_run": True}, FakeClock())
    try:
        for step in case["steps"]:
            play_event_step(target, case, step)
        return {"worker_id": target.plane.worker_id, "events": target.plane.buffered()}
    finally:
        target.close()


def play_event_step(target: PlaneScope, case: dict[str, Any], step: dict[str, Any]) -> None:
    action, label = step["do"], step.get("run", FIRST_RUN)
    for _ in range(step.get("times", 1)):
        if action == "start_run":
            target.start_run(label, step.get("step_budget"), agent=step["agent"])
        elif action == "finish_run":
            target.finish_run(label, step["status"])
        elif action == "model_call":
            fields = {k: v for k, v in step.items() if k not in ("do", "run")}
            target.run(label).record_model_call(**fields)
        elif action == "success":
            target.success(label, step["tool"], step.get("duration_ms"))
        elif action == "failure":
            target.failure(label, step["tool"], failure_of(step), step.get("duration_ms"))
        elif action == "blocked":
            target.blocked(label, step["tool"])
        elif action == "available":
            target.available(label, step["tools"])
        elif action == "fleet":
            target.fleet(step["body"], step["source"])
        elif action == "advance":
            target.clock.advance(step["seconds"])
        else:
            raise CaseError(f"unknown action {action!r}")


def check_batch(case: dict[str, Any], batch: dict[str, Any]) -> None:
    """The batch against the case's expected one, and every event's id and ts (README)."""
    events = batch["events"]
    matcher = Matcher()
    matcher.check(case["batch"]["worker_id"], batch["worker_id"], "$.worker_id")
    matcher.check_unordered(case["batch"]["events"], events, "$.events")
    ids = [event.get("id") for event in events]
    if len(set(ids)) != len(ids) or not all(isinstance(i, str) and 0 < len(i) <= 200 for i in ids):
        raise CaseError(f"event ids must be unique strings of 1-200 characters: {ids}")
    for event in events:
        check_timestamp(event.get("ts"))


def check_timestamp(value: Any) -> None:
    try:
        moment = datetime.fromisoformat(value)
    except (TypeError, ValueError) as exc:
        raise CaseError(f"ts must be ISO 8601, got {value!r}") from exc
    if moment.tzinfo is None:
        raise CaseError(f"ts must carry a time zone, got {value!r}")
