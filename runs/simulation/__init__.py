"""Outage replay: a scripted research agent run many times while its search vendor is down.

``scenario`` holds the story's numbers and the cost model, ``script`` the scripted model's
decisions (pure: no clock, no I/O), ``replay`` drives it through the real SDK and ingest.
"""
