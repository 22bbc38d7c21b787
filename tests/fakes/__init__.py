"""Real local stand-ins for services that cannot exist on this machine (Slack's servers)."""
