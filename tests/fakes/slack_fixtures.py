"""Bot mode against the local Slack stand-in, for any test package: the real ``slack_sdk``
WebClient, the real ``POST /slack/actions`` on pytest-django's live server, and a Celery worker
of its own.

The worker consumes a queue only these tests use (``SLACK_TASK_QUEUE``) and runs with the bot's
settings pointed at the stand-in, so no other test's worker ever sees a Slack task.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

from scripts.slack_standin import SlackStandIn
from scripts.testing import processes
from tests.slack.support import CHANNEL, QUEUE, SECRET, TOKEN


@pytest.fixture(scope="session")
def slack_standin() -> Iterator[SlackStandIn]:
    with SlackStandIn(signing_secret=SECRET, bot_token=TOKEN) as server:
        yield server


@pytest.fixture(scope="session")
def slack_worker(
    django_db_setup: None, slack_standin: SlackStandIn
) -> Iterator[processes.CeleryWorkerProcess]:
    try:
        processes.database_url_of_test_db()
    except LookupError as exc:
        pytest.skip(str(exc))
    worker = processes.CeleryWorkerProcess(
        concurrency=2,
        queues=(QUEUE,),
        env={
            "SLACK_BOT_TOKEN": TOKEN,
            "SLACK_SIGNING_SECRET": SECRET,
            "SLACK_CHANNEL": CHANNEL,
            "SLACK_API_URL": slack_standin.api_url,
            "SLACK_TASK_QUEUE": QUEUE,
            "SITE_URL": "http://127.0.0.1:8000",
        },
    )
    worker.start()
    yield worker
    worker.stop()


@pytest.fixture
def bot(
    settings: Any,
    slack_standin: SlackStandIn,
    slack_worker: processes.CeleryWorkerProcess,
    live_server: Any,
    fleet_redis: redis.Redis,
) -> Iterator[SlackStandIn]:
    """Bot mode on in this process (the live server's) and in the worker; a clean stand-in."""
    settings.SLACK_BOT_TOKEN = TOKEN
    settings.SLACK_SIGNING_SECRET = SECRET
    settings.SLACK_CHANNEL = CHANNEL
    settings.SLACK_API_URL = slack_standin.api_url
    settings.SLACK_TASK_QUEUE = QUEUE
    settings.SITE_URL = live_server.url
    slack_standin.reset()
    slack_standin.actions_url = live_server.url + "/slack/actions"
    processes.declare_celery_queues()
    yield slack_standin
    slack_worker.wait_idle()
