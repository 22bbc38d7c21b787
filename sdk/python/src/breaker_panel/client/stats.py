"""What a plane's background threads have done, for monitoring and tests."""

from __future__ import annotations


class SenderStats:
    """What the background sender has done; read it for monitoring or tests."""

    def __init__(self) -> None:
        self.sent_batches = 0
        self.accepted = 0
        self.duplicates = 0
        self.rejected = 0
        self.dropped = 0  # buffer full: never sent
        self.dropped_reported = 0  # of those, acknowledged by the control plane
        self.failed_attempts = 0  # sends that did not get a 200 (and were retried)
        self.refused_batches = 0  # refused for good (4xx): their events are counted as dropped
        self.undeliverable = 0  # single events the server kept failing (5xx): counted as dropped
        self.malformed_replies = 0  # a 200 whose body made no sense: taken as acknowledged
        self.loop_errors = 0  # unexpected exceptions the background threads logged and survived
        self.fleet_polls = 0
        self.trial_requests = 0  # POST /api/v1/tools/{tool}/trial sent
        self.trials_granted = 0

    def as_dict(self) -> dict[str, int]:
        return dict(vars(self))
