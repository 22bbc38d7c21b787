"""Breaker Panel control plane: Django project, settings and the Celery app."""

from __future__ import annotations

# Importing the Celery app here makes @shared_task use it (standard Django + Celery wiring).
from .celery import app as celery_app

__all__ = ("celery_app",)
