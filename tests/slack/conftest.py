"""Users for the Slack tests; the stand-in, its worker and ``bot`` come from
``tests.fakes.slack_fixtures`` (registered by the root conftest)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from breakers.access.operators import operators_group
from breakers.models import SlackUser
from scripts.slack_standin import TEAM_ID


@pytest.fixture
def operator(transactional_db: None) -> User:
    user = User.objects.create_user("oncall-op", password="op-pass-123456789")
    user.groups.add(operators_group())
    SlackUser.objects.create(
        team_id=TEAM_ID, slack_user_id="U0OPERATOR", slack_name="operator", user=user
    )
    return user


@pytest.fixture
def viewer(transactional_db: None) -> User:
    user = User.objects.create_user("watcher", password="viewer-pass-123456")
    SlackUser.objects.create(
        team_id=TEAM_ID, slack_user_id="U0VIEWER01", slack_name="viewer", user=user
    )
    return user
