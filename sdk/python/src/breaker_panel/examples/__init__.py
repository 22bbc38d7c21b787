"""Runnable offline examples, one per framework: `python -m breaker_panel.examples.NAME`.

Each scripts the model (no API key, no network) to keep calling a search tool whose vendor is
down, and prints what the breaker changed: the tools offered on each model call, the notice,
and the answer. They need the framework's extra installed.
"""
