"""What operators and platforms read about a running control plane: ``/healthz`` and ``/readyz``
(``health``), ``/metrics`` (``metrics``) and the web processes' Prometheus counters
(``call_metrics``).
"""
