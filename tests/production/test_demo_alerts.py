"""The demo's Slack stand-in shows what it received; operators can use the admin the pages name."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from django.test import Client

from breakers.access.operators import operators_group
from scripts.testing.processes import ROOT, free_port


@pytest.fixture
def standin() -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "slack_standin.py"), "--port", str(port)],
        stdout=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while True:
        try:
            urllib.request.urlopen(url + "/messages.json", timeout=1).close()
            break
        except OSError:
            assert time.monotonic() < deadline, "the stand-in did not start"
            time.sleep(0.05)
    yield url
    process.terminate()
    process.wait(10)


def _post(url: str, payload: object) -> int:
    request = urllib.request.Request(url, data=json.dumps(payload).encode(), method="POST")
    try:
        with urllib.request.urlopen(request, timeout=5) as reply:
            return reply.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_the_standin_shows_every_message_escaped(standin: str) -> None:
    webhook = standin + "/services/demo/breaker-panel"
    message = {
        "text": "web_search opened",
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": "<script>x()</script> opened"}}
        ],
    }
    assert _post(webhook, message) == 200
    assert _post(webhook, {"text": ""}) == 400  # what Slack answers: no_text
    page = urllib.request.urlopen(standin + "/", timeout=5).read().decode()
    assert "&lt;script&gt;x()&lt;/script&gt; opened" in page
    assert "<script>" not in page
    assert (
        len(json.loads(urllib.request.urlopen(standin + "/messages.json", timeout=5).read())) == 1
    )


@pytest.mark.django_db
def test_operators_can_manage_channels_and_policies_in_the_admin(client: Client) -> None:
    user = User.objects.create_user("op", password="op-pass-12345678", is_staff=True)
    user.groups.add(operators_group())
    client.force_login(user)
    index = client.get("/admin/").content.decode()
    assert "permission to view or edit anything" not in index
    for url in (
        "/admin/breakers/alertchannel/",
        "/admin/breakers/alertchannel/add/",
        "/admin/breakers/tool/",
        "/admin/breakers/alert/",
    ):
        assert client.get(url).status_code == 200, url
