"""Every time setting of the control plane that the story's clock runs through is scaled with
the replay's speed (``simulate_outage --print-server-env``); the others say why they are not."""

from __future__ import annotations

from django.conf import settings

from breakers.replay.orchestration import NOT_STORY_TIME, server_settings


def test_every_seconds_setting_is_scaled_or_says_why_not() -> None:
    names = {name for name in dir(settings) if name.endswith("_SECONDS")}
    scaled = set(server_settings(speed=60.0))
    assert names - scaled - set(NOT_STORY_TIME) == set()
    assert scaled & set(NOT_STORY_TIME) == set()


def test_the_flapping_window_and_the_alerts_keep_the_replay_s_time() -> None:
    env = server_settings(speed=60.0)
    # 600 s in the story: the fleet mode's "Breaker open" came 9 minutes late unscaled.
    assert float(env["ALERT_FLAP_WINDOW_SECONDS"]) == 10.0
    assert float(env["ALERT_SWEEP_SECONDS"]) < 1.0
    assert float(env["SLACK_RETRY_BASE_SECONDS"]) <= float(env["SLACK_RETRY_MAX_SECONDS"])
    assert float(env["BREAKER_COOLDOWN_SECONDS"]) <= float(env["BREAKER_MAX_COOLDOWN_SECONDS"])
    # At speed 1 every setting is its production default.
    assert float(server_settings(speed=1.0)["ALERT_FLAP_WINDOW_SECONDS"]) == 600.0
