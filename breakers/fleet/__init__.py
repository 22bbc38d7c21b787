"""Fleet scope: one breaker per tool shared by every worker, kept in Redis.

``rules`` names what the rules speak of; ``store`` runs the rules as atomic Lua scripts against
Redis, where the web processes and Celery workers share them (``tests/fleet/reference_model.py``
restates them in Python as the tests' oracle).
"""
