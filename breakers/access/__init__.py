"""Who may do what: operators act on breakers (``operators``); a network or a token reads the
operational endpoints (``ops_endpoints``).
"""
