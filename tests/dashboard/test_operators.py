"""Who is an operator, and the server refusing everyone else."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser, Group, User
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.test import Client, RequestFactory
from django.urls import include, path
from pytest_django import DjangoAssertNumQueries

from breakers.access.operators import OPERATORS_GROUP, is_operator, operator_required


@operator_required
def _act(request: HttpRequest) -> HttpResponse:
    return HttpResponse("acted")


# A URLconf with one operator-only view, as the operator actions will be wired.
urlpatterns = [path("act/", _act), path("", include("controlplane.urls"))]


@pytest.mark.django_db
def test_migration_creates_the_operators_group() -> None:
    assert Group.objects.filter(name=OPERATORS_GROUP).exists()


def test_group_member_is_an_operator(operator: User) -> None:
    assert is_operator(operator)


def test_plain_user_is_not_an_operator(viewer: User) -> None:
    assert not is_operator(viewer)


def test_superuser_is_an_operator(db: None) -> None:
    admin = User.objects.create_superuser("root", password="root-pass-123")
    assert is_operator(admin)


def test_inactive_member_is_not_an_operator(operator: User) -> None:
    operator.is_active = False
    assert not is_operator(operator)


def test_anonymous_user_is_not_an_operator() -> None:
    assert not is_operator(AnonymousUser())


def test_answer_is_cached_per_user_object(
    operator: User, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    with django_assert_num_queries(1):
        assert is_operator(operator)
        assert is_operator(operator)


def test_operator_required_refuses_a_viewer(viewer: User, rf: RequestFactory) -> None:
    request = rf.post("/act/")
    request.user = viewer
    with pytest.raises(PermissionDenied):
        _act(request)


@pytest.mark.urls("tests.dashboard.test_operators")
def test_server_refuses_a_viewer_with_an_explanation(client: Client, viewer: User) -> None:
    client.force_login(viewer)
    response = client.post("/act/")
    assert response.status_code == 403
    html = response.content.decode()
    assert "operators" in html
    assert "acted" not in html


@pytest.mark.urls("tests.dashboard.test_operators")
def test_server_lets_an_operator_act(client: Client, operator: User) -> None:
    client.force_login(operator)
    response = client.post("/act/")
    assert response.status_code == 200
    assert response.content == b"acted"
