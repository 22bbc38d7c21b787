"""Fixtures for the production-shaped tests: gunicorn with DEBUG off, collected static files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from scripts.testing.processes import database_url_of_test_db
from tests.production.servers import ProductionWebServer, collect_static


@pytest.fixture(scope="session")
def static_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("staticfiles")
    collect_static(root)
    return root


@pytest.fixture
def production_web(static_root: Path, transactional_db: None) -> Iterator[ProductionWebServer]:
    """gunicorn as in docker-compose.yml (3 gevent workers, DEBUG off) on the test database."""
    try:
        database_url_of_test_db()
    except LookupError as exc:
        pytest.skip(str(exc))
    with ProductionWebServer(workers=3) as server:
        server.start(STATIC_ROOT=str(static_root))
        yield server
