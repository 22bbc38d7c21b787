"""The scripted research model and the story's numbers, without any server."""

from __future__ import annotations

import random
from decimal import Decimal

from breakers.replay.scenario import Scenario
from breakers.replay.script import READ, SEARCH, Action, ResearchScript

BOTH = {SEARCH, READ}


def _script(seed: int = 1) -> ResearchScript:
    scenario = Scenario()
    return ResearchScript(scenario.step_budget, scenario.rephrase_probability, random.Random(seed))


def test_a_healthy_run_searches_reads_twice_and_answers_in_five_steps() -> None:
    script = _script()
    actions = []
    for step in range(1, 21):
        action = script.next_action(step=step, offered=BOTH)
        actions.append(action)
        if action is Action.SEARCH:
            script.search_succeeded()
        elif action is Action.READ:
            script.page_read()
        else:
            break
    assert actions == [Action.SEARCH, Action.READ, Action.SEARCH, Action.READ, Action.ANSWER]


def test_with_the_tool_offered_and_failing_the_model_spends_its_whole_budget() -> None:
    searches = []
    for seed in range(400):
        script = _script(seed)
        count = 0
        for step in range(1, 21):
            action = script.next_action(step=step, offered=BOTH)
            if action is Action.SEARCH:
                count += 1
                script.search_failed()
            elif action is not Action.READ:
                assert (step, action) == (20, Action.GIVE_UP)
                break
        searches.append(count)
    mean = sum(searches) / len(searches)
    # The story: ~3,700 calls over 340 runs, i.e. ~10.9 per run.
    assert 10.3 < mean < 11.5


def test_told_the_tool_is_gone_the_model_answers_with_what_it_has() -> None:
    script = _script()
    assert script.next_action(step=1, offered=BOTH) is Action.SEARCH
    script.search_failed()
    assert script.next_action(step=2, offered={READ}) is Action.ANSWER_DEGRADED


def test_a_full_twenty_step_run_costs_about_a_dollar_twenty() -> None:
    scenario = Scenario()
    total = sum((scenario.step_cost(step).cost_usd for step in range(1, 21)), Decimal(0))
    assert Decimal("1.15") < total < Decimal("1.25")
    # Later steps cost more: the context grows.
    assert scenario.step_cost(20).cost_usd > 2 * scenario.step_cost(1).cost_usd


def test_run_starts_put_the_story_s_runs_inside_the_window() -> None:
    scenario = Scenario()
    starts = scenario.run_starts()
    in_window = [s for s in starts if scenario.vendor_is_down(s)]
    assert len(in_window) == 340
    assert len(starts) == 340 + scenario.baseline_runs + scenario.tail_runs


def test_the_model_stops_asking_for_a_tool_the_notice_says_is_gone() -> None:
    from breaker_panel import ToolBreaker, ToolFailure

    breaker = ToolBreaker()
    for _ in range(ToolBreaker.THRESHOLD):
        breaker.record_failure(SEARCH, ToolFailure("503 from vendor", retryable=True))
    notice = breaker.notice()  # the SDK's own wording, not a copy of it
    script = _script()
    # The tool is still in the tools array (a removal bug), but the notice says it is gone.
    assert script.next_action(step=1, offered=BOTH, notice=notice) is Action.ANSWER_DEGRADED


def test_a_tool_left_in_the_tools_array_without_a_notice_is_called() -> None:
    script = _script()
    assert script.next_action(step=1, offered=BOTH, notice=None) is Action.SEARCH
    # A notice about another tool changes nothing for web_search.
    other = "These tools are removed for the rest of this run:\n- read_page (run scope; x)"
    script.search_succeeded()
    script.page_read()
    assert script.next_action(step=2, offered=BOTH, notice=other) is not Action.ANSWER_DEGRADED


def test_the_model_takes_its_wrap_up_steps_to_finish_without_the_tool() -> None:
    scenario = Scenario()
    script = ResearchScript(20, scenario.rephrase_probability, random.Random(1), wrap_up_steps=3)
    actions = [script.next_action(step=step, offered={READ}) for step in range(4, 7)]
    assert actions == [Action.WRAP_UP, Action.WRAP_UP, Action.ANSWER_DEGRADED]
    assert script.wrap_up_started_at == 4
    # Once gone, the tool stays gone for the run even if the array offers it again.
    script = ResearchScript(20, 0.55, random.Random(1), wrap_up_steps=2)
    assert script.next_action(step=1, offered={READ}) is Action.WRAP_UP
    assert script.next_action(step=2, offered=BOTH) is Action.ANSWER_DEGRADED


def test_wrap_up_never_runs_past_the_step_budget() -> None:
    script = ResearchScript(20, 0.55, random.Random(1), wrap_up_steps=5)
    assert script.next_action(step=18, offered={READ}) is Action.WRAP_UP
    assert script.next_action(step=19, offered={READ}) is Action.WRAP_UP
    assert script.next_action(step=20, offered={READ}) is Action.GIVE_UP


def test_the_wrap_up_floor_matches_the_issue_s_arithmetic() -> None:
    scenario = Scenario()
    floors = [round(scenario.wrap_up_floor(n) * 100, 1) for n in (1, 2, 3, 5)]
    assert floors == [2.2, 4.8, 7.6, 14.1]
