"""Each framework's offline example runs and shows the breaker at work."""

from __future__ import annotations

import importlib

import pytest
from pydantic_ai import models


@pytest.mark.parametrize("framework", ["openai_agents", "langchain", "pydantic_ai"])
def test_the_example_removes_the_failing_tool_and_ends_with_an_answer(framework: str) -> None:
    allowed = models.ALLOW_MODEL_REQUESTS
    try:
        lines = importlib.import_module(f"breaker_panel.examples.{framework}").main()
    finally:
        models.ALLOW_MODEL_REQUESTS = allowed
    assert lines[:4] == [
        "call 1: tools offered: ['web_search', 'calculator']",
        "call 2: tools offered: ['web_search', 'calculator']",
        "call 3: tools offered: ['calculator']",  # removed after two 503s
        "call 4: tools offered: ['calculator']",  # its third call was refused, not run
    ]
    assert "web_search: it keeps failing (last error: ConnectionError: 503" in lines[4]
    assert lines[-1] == "answer: I could not search."
