"""Agent tokens: made by a management command (shown once), stored hashed, revoked in the admin."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from runs.models import AgentToken, hash_token
from tests.ingest.support import EVENTS_URL


def create_token(*args: str) -> tuple[str, str]:
    out = io.StringIO()
    call_command("create_agent_token", *args, stdout=out)
    text = out.getvalue()
    return text, text.strip().splitlines()[-1]


def post_empty_batch(client: Client, raw: str) -> int:
    response = client.post(
        EVENTS_URL,
        data=b'{"worker_id": "w-1", "events": []}',
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    )
    return response.status_code


@pytest.mark.django_db
def test_the_last_line_of_the_output_is_a_working_token(client: Client) -> None:
    _, raw = create_token("research-fleet")

    assert post_empty_batch(client, raw) == 200
    token = AgentToken.objects.get()
    assert (token.name, token.is_operator) == ("research-fleet", False)
    assert token.last_used_at is not None


@pytest.mark.django_db
def test_only_a_hash_of_the_token_is_stored() -> None:
    text, raw = create_token("research-fleet")

    token = AgentToken.objects.get()
    assert token.token_hash == hash_token(raw)
    assert raw not in token.token_hash
    assert raw.startswith(token.display_prefix)
    assert "only its hash is kept" in text


@pytest.mark.django_db
def test_operator_flag_makes_an_operator_token() -> None:
    _, raw = create_token("on-call", "--operator")

    assert AgentToken.objects.get(token_hash=hash_token(raw)).is_operator


@pytest.mark.django_db
def test_a_blank_name_is_refused() -> None:
    with pytest.raises(CommandError, match="NAME must be"):
        create_token("   ")
    assert AgentToken.objects.count() == 0


@pytest.mark.django_db
def test_revoking_in_the_admin_locks_the_token_out(admin_client: Client, client: Client) -> None:
    _, raw = create_token("research-fleet")
    token = AgentToken.objects.get()
    assert post_empty_batch(client, raw) == 200

    response = admin_client.post(
        "/admin/runs/agenttoken/",
        {"action": "revoke", "_selected_action": [token.pk]},
        follow=True,
    )

    assert response.status_code == 200
    assert b"Revoked 1 token" in response.content
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert post_empty_batch(client, raw) == 401


@pytest.mark.django_db
def test_the_admin_shows_the_prefix_never_the_hash(admin_client: Client) -> None:
    _, raw = create_token("research-fleet")
    token = AgentToken.objects.get()

    page = admin_client.get(f"/admin/runs/agenttoken/{token.pk}/change/").content.decode()

    assert token.display_prefix in page
    assert token.token_hash not in page
    assert raw not in page
