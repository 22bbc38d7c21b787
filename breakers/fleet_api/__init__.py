"""The fleet's HTTP API under ``/api/v1/`` (``routes``) and its long-poll watcher
(``long_poll``).
"""
