"""Stand-ins and real processes that the tests and the benchmarks both drive: the control plane
served by gunicorn and Celery (``processes``), a fake Slack (``fake_slack``), a scripted events
endpoint for the SDK's sender (``events_server``), and MCP upstreams and gateways
(``mcp_servers``, ``mcp_upstream``). The apps never import it
(docs/adr/0142-what-tests-and-benchmarks-both-drive.md).
"""
