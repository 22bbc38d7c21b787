"""The project's own set-up: settings refuse bad configuration, the compose file is valid."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from django.core.exceptions import ImproperlyConfigured

from controlplane.env import envbool, envint

ROOT = Path(__file__).resolve().parent.parent


def _django_check(**env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "DEBUG")}
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_production_refuses_the_development_secret() -> None:
    result = _django_check(DEBUG="False")
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


def test_production_starts_with_a_real_secret() -> None:
    result = _django_check(DEBUG="False", SECRET_KEY=secrets.token_urlsafe(50))
    assert result.returncode == 0, result.stderr


def test_envbool_rejects_anything_but_true_or_false(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BP_FLAG", "yes")
    with pytest.raises(ImproperlyConfigured, match="BP_FLAG must be True or False"):
        envbool("BP_FLAG", False)
    monkeypatch.setenv("BP_FLAG", "False")
    assert envbool("BP_FLAG", True) is False


def test_envint_rejects_a_non_number(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BP_NUMBER", "5s")
    with pytest.raises(ImproperlyConfigured, match="BP_NUMBER must be an integer"):
        envint("BP_NUMBER", 5)


def _compose_command() -> list[str] | None:
    docker = shutil.which("docker")
    if docker:
        probe = subprocess.run([docker, "compose", "version"], capture_output=True, timeout=30)
        if probe.returncode == 0:
            return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    return [legacy] if legacy else None


def test_compose_file_is_valid() -> None:
    command = _compose_command()
    if command is None:
        pytest.skip(
            "neither `docker compose` nor `docker-compose` is installed "
            "(`make test` installs Debian's docker-compose when it can)"
        )
    result = subprocess.run(
        [*command, "-f", str(ROOT / "docker-compose.yml"), "config"],
        env={**os.environ, "SECRET_KEY": "compose-validation"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    for service in ("web:", "worker:", "beat:", "redis:", "postgres:"):
        assert service in result.stdout


# Compose sets these to its own services; every other documented setting passes through as set.
COMPOSE_WIRED = frozenset({"DATABASE_URL", "REDIS_URL"})
APP_SERVICES = ("web", "worker", "beat")


def documented_settings(readme: str) -> list[str]:
    """The variable names in README.md's settings table ("| variable | default | what it is |")."""
    lines = readme.splitlines()
    start = lines.index("| variable | default | what it is |") + 2
    names: list[str] = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        first_cell = line.split("|")[1]
        names += re.findall(r"`([A-Z][A-Z0-9_]+)`", first_cell)
    return names


def test_every_documented_setting_reaches_web_worker_and_beat(tmp_path: Path) -> None:
    """Issue 23, finding 10: a value in .env must reach the containers, not only fill ${...}."""
    command = _compose_command()
    if command is None:
        pytest.skip("neither `docker compose` nor `docker-compose` is installed")
    names = documented_settings((ROOT / "README.md").read_text())
    assert len(names) > 20, names  # the table was found and read
    sentinels = {name: f"sentinel-{name.lower()}" for name in names}
    env_file = tmp_path / ".env"
    env_file.write_text("".join(f"{name}={value}\n" for name, value in sentinels.items()))
    shell = {k: v for k, v in os.environ.items() if k not in sentinels}  # .env alone sets them
    result = subprocess.run(
        [*command, "-f", str(ROOT / "docker-compose.yml"), "--env-file", str(env_file), "config"],
        env=shell,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    services = yaml.safe_load(result.stdout)["services"]
    missing = [
        f"{service}: {name}"
        for service in APP_SERVICES
        for name in names
        if name not in services[service].get("environment", {})
        or (name not in COMPOSE_WIRED and services[service]["environment"][name] != sentinels[name])
    ]
    assert not missing, missing
