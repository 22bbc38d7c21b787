"""Slack bot mode: one message per incident updated in place (``sync``), the buttons' signed
presses (``verify``, ``actions``, ``endpoint``), who may press them (``linking``) and the answers
to one user alone (``respond``). Webhook-only mode is ``breakers.alerts``.
"""
