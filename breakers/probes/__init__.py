"""Half-open probes (``runner``) and the one place outbound HTTP goes through (``outbound_http``).
Callable probes live under ``BREAKER_PROBE_CALLABLE_PREFIXES`` (default ``breakers.probes.``).
"""
