"""Fleet scope: one breaker per tool shared by every worker, kept in Redis.

``rules`` is the pure reference model (documentation and test oracle); ``store`` runs the same
rules as atomic Lua scripts against Redis, where the web processes and Celery workers share them.
"""
