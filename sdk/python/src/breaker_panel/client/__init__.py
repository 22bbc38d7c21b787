"""The ControlPlane client: run, worker and fleet scope in the agent process, reporting in the
background. Only the standard library is used.

    plane = ControlPlane(url, token=token, worker_id="w1")
    run = plane.start_run(agent="research", step_budget=20)
    tools = run.available(TOOLS); text = run.notice()
    run.record_success("web_search") / run.record_failure("web_search", ToolFailure(...))
    run.record_model_call(model=..., input_tokens=..., output_tokens=..., cost_usd=...,
                          cache_read_tokens=..., cache_write_tokens=...)  # cost/cache optional
    run.finish(status="completed")
    plane.close()                       # flushes what is buffered (interpreter exit does too)

``plane.py`` wires the parts: ``run.py`` (the run handle), ``sender.py`` (the buffer and the
thread that sends it), ``fleet_sync.py`` (the fleet poll and trial leases), ``transport.py``
(HTTP and backoff), ``events.py`` and ``ids.py`` (what is sent); ``config.py`` holds the
settings (``PlaneConfig``). Contract: docs/api.md.
"""

from __future__ import annotations

from breaker_panel.client.config import PlaneConfig
from breaker_panel.client.plane import ControlPlane
from breaker_panel.client.run import Run
from breaker_panel.client.stats import SenderStats

__all__ = ["ControlPlane", "PlaneConfig", "Run", "SenderStats"]
