"""OTLP/HTTP trace receiver: spans that follow the GenAI semantic conventions become the same
events as ``POST /api/v1/events`` (decode -> mapping -> the ingest service)."""
