"""The Outages page's ways section: the newest played-through ``replay_ways`` record per provider
shape, the cheapest way and what it saves against remove, the goal per mode (missed where it is),
the stored assumptions; never a half-played record by default; hostile stored text escaped."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from runs.models import OutageReplay, WaysReplay
from tests.dashboard.factories import HOSTILE_NAME, HOSTILE_SCRIPT
from tests.dashboard.outage_story import make_ways_replay, ways_row

pytestmark = pytest.mark.django_db


def _page(client: Client, query: str = "") -> str:
    response = client.get(f"/outages/{query}")
    assert response.status_code == 200
    return response.content.decode()


def test_without_a_record_the_page_says_how_to_make_one(viewer_client: Client) -> None:
    html = _page(viewer_client)
    assert "Ways of taking a tool away, with prompt caching" in html
    assert "make replay-ways" in html and "about 35 minutes" in html


def test_the_cheapest_way_its_saving_and_the_goal_per_mode_are_stated(
    viewer_client: Client,
) -> None:
    record = make_ways_replay()
    html = _page(viewer_client)
    # remove: 150 + 24 + 20 = 194; refuse: 90 + 14.4 + 22 = 126.4, the cheapest: saves $67.60.
    assert "Cheapest: refuse" in html
    assert "saving $67.60 (35%) against remove" in html
    # refuse is dearer than remove in fleet mode: it misses the goal there, and says why.
    assert "fleet: $22.00 is more than remove&#x27;s $20.00" in html
    # restrict keeps too little of the cache at OpenAI in run mode.
    assert "run: kept 50%, under 90%" in html
    assert "met in every mode" in html  # default
    assert "prompt: tools 1500 tokens each" in html  # the stored assumptions
    assert "speed 60x" in html and f"{record.started_at:%Y-%m-%d}" in html
    assert 'id="ways-chart"' in html


def test_a_half_played_record_is_never_the_default_but_can_be_chosen(
    viewer_client: Client,
) -> None:
    complete = make_ways_replay(started_at=timezone.now() - timedelta(hours=3))
    partial = make_ways_replay(started_at=timezone.now() - timedelta(minutes=5), complete=False)
    html = _page(viewer_client)
    assert "is <strong>interrupted</strong>" not in html
    assert f'<option value="{complete.pk}" selected>' in html
    chosen = _page(viewer_client, f"?ways={partial.pk}")
    assert "is <strong>interrupted</strong>: 3 of 28 plays recorded" in chosen
    assert "stopped by KeyboardInterrupt" in chosen


def test_hostile_stored_text_is_escaped(viewer_client: Client) -> None:
    record = make_ways_replay(assumptions=[HOSTILE_SCRIPT])
    record.rows = [
        *record.rows,
        ways_row(
            HOSTILE_NAME, HOSTILE_SCRIPT, HOSTILE_NAME, spend=1.0, kept=0.5, rule=HOSTILE_SCRIPT
        ),
        ways_row("openai", HOSTILE_NAME, "remove", spend=1.0, kept=0.5),
    ]
    record.interrupted_by = HOSTILE_SCRIPT
    record.save()
    html = _page(viewer_client)
    assert HOSTILE_SCRIPT not in html and HOSTILE_NAME not in html
    assert "&lt;script&gt;alert(" in html and "&lt;img src=x" in html


def test_rows_that_are_not_the_command_s_shape_are_left_out_and_counted(
    viewer_client: Client,
) -> None:
    rows: list[Any] = [
        ways_row("openai", "fleet", "remove", spend=2.0, kept=0.4),
        "not a row",
        {"provider": "openai", "mode": "run", "way": 3, "spend_usd": 1.0},
        {"provider": "openai", "mode": "run", "way": "refuse", "spend_usd": "NaN"},
    ]
    WaysReplay.objects.create(
        speed=60.0, rows=rows, planned=[], assumptions="not a list", verdicts="x", complete=True
    )
    html = _page(viewer_client)
    assert "3 stored plays could not be read and are left out" in html
    assert "This record stored no assumptions" in html


@pytest.mark.parametrize("query", ["?ways=abc", "?ways=-1", "?ways=" + "9" * 19])
def test_a_malformed_record_key_is_a_400(viewer_client: Client, query: str) -> None:
    assert viewer_client.get(f"/outages/{query}").status_code == 400


def test_a_record_not_among_the_newest_is_a_404(viewer_client: Client) -> None:
    assert viewer_client.get("/outages/?ways=999999").status_code == 404


def test_the_mode_table_shows_cached_spend_per_provider_and_old_replays_still_render(
    viewer_client: Client,
) -> None:
    start = timezone.now() - timedelta(minutes=10)
    caching = {
        "anthropic": {"spend_usd": 123.456},
        "openai": {"spend_usd": 98.7},
    }
    for i, (mode, summary) in enumerate(
        (
            ("none", {"mode": "none", "runs": 1, "model_spend_usd": 1.0}),
            ("fleet", {"mode": "fleet", "runs": 1, "model_spend_usd": 1.0, "caching": caching}),
            ("run", {"mode": "run", "caching": {"openai": {"spend_usd": "corrupt"}}}),
        )
    ):
        began = start + timedelta(seconds=40 * i)
        OutageReplay.objects.create(
            mode=mode, speed=60.0, worker_prefix=f"research-replay-c-{mode}-", started_at=began,
            outage_started_at=began + timedelta(seconds=4),
            outage_ended_at=began + timedelta(seconds=26),
            finished_at=began + timedelta(seconds=32), scenario={"batch": "c1"}, summary=summary,
        )  # fmt: skip
    html = _page(viewer_client)
    assert "Cached spend: Anthropic, OpenAI" in html
    assert "$123.46<br>$98.70" in html
    assert "—<br>—" in html  # a corrupt figure reads as unknown


def test_a_way_without_remove_s_figure_in_its_mode_is_not_judged_not_missed(
    viewer_client: Client,
) -> None:
    from breakers.replay.ways_matrix import cheapest_ways

    record = make_ways_replay(providers=("openai",))
    record.rows = [r for r in record.rows if not (r["mode"] == "worker" and r["way"] == "remove")]
    record.verdicts = cheapest_ways(record.rows)
    record.save(update_fields=["rows", "verdicts"])
    html = _page(viewer_client)
    assert html.count('<span class="muted">not judged</span>') == 3  # worker: the other ways
    assert "remove not played in this mode: no comparison" in html
