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
    assert float(env["ALERT_SWEEP_SECONDS"]) <= 1.0
    assert float(env["SLACK_RETRY_BASE_SECONDS"]) <= float(env["SLACK_RETRY_MAX_SECONDS"])
    assert float(env["BREAKER_COOLDOWN_SECONDS"]) <= float(env["BREAKER_MAX_COOLDOWN_SECONDS"])
    # At speed 1 every setting is its production default.
    assert float(server_settings(speed=1.0)["ALERT_FLAP_WINDOW_SECONDS"]) == 600.0


def test_beat_s_schedule_at_the_replay_s_speed_is_one_a_worker_keeps_up_with() -> None:
    """At floors of 0.1 s beat sent 32 tasks a second at 60x; on a busy machine the demo's worker
    fell behind, every tick expired in its queue unrun, and web_search never went half-open."""
    env = server_settings(speed=60.0)
    interval = {
        settings.BREAKER_TICK_SECONDS: float(env["BREAKER_TICK_SECONDS"]),
        settings.ALERT_SWEEP_SECONDS: float(env["ALERT_SWEEP_SECONDS"]),
    }
    per_second = sum(
        1 / interval.get(entry["schedule"], entry["schedule"])
        for entry in settings.CELERY_BEAT_SCHEDULE.values()
    )
    assert per_second <= 8.0
