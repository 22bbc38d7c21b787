"""The outage replay: a scripted research agent run many times while its search vendor is down.

Import ``breakers.replay.outage`` only: it is the replay's one public module (the entry point
``play_outage``, the result ``OutageResult`` and what the pages read). Nothing is imported here.
"""
