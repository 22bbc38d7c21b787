"""The example agent loop: it shows a failing tool leaving a real OpenAI Chat tools array."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

from breaker_panel import example

ROOT = Path(__file__).resolve().parents[2]


def run_example() -> tuple[str, list[str]]:
    lines: list[str] = []
    answer = example.run_agent(example.ScriptedModel(), print_=lines.append)
    return answer, lines


def test_web_search_is_offered_until_it_fails_five_times() -> None:
    _, lines = run_example()
    offers = [line for line in lines if "tools offered" in line]
    assert all("web_search" in line for line in offers[:5])
    assert all("web_search" not in line for line in offers[5:])
    assert offers[5].endswith("tools offered: fetch_url, calculator")


def test_the_notice_appears_when_web_search_is_removed() -> None:
    _, lines = run_example()
    text = "\n".join(lines)
    assert text.index("notice sent to the model") > text.index("step  6:")
    assert "- web_search: it keeps failing (last error: 503" in text


def test_the_model_finishes_early_and_admits_what_it_could_not_do() -> None:
    answer, lines = run_example()
    assert "web_search was unavailable" in answer
    assert sum("tools offered" in line for line in lines) < example.STEP_BUDGET


def test_the_example_leaves_its_tools_array_untouched() -> None:
    before = copy.deepcopy(example.TOOLS)
    run_example()
    assert before == example.TOOLS


def test_the_example_runs_as_a_module_without_django() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "breaker_panel.example"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "step  6: tools offered: fetch_url, calculator" in result.stdout
