"""What the Slack tests share besides fixtures: the bot's settings and the queue of its worker."""

from __future__ import annotations

import uuid

SECRET = "slack-signing-secret-for-the-tests-0123456789"
TOKEN = "xoxb-breaker-panel-tests"
QUEUE = f"slack-tests-{uuid.uuid4().hex[:8]}"
CHANNEL = "#agent-tools"
