"""Event and run ids: a per-process random prefix (64 bits, renewed after ``fork``) and a counter,
unique across processes without a ``uuid4()`` per event."""

from __future__ import annotations

import itertools
import os


class ProcessIds:
    """Process-unique ids: a random prefix and a counter (``next()`` on a count is atomic)."""

    def __init__(self) -> None:
        self.renew()

    def renew(self) -> None:
        self.prefix = os.urandom(8).hex()
        self._counter = itertools.count(1)

    def new(self) -> str:
        return f"{self.prefix}-{next(self._counter):x}"


process_ids = ProcessIds()
# A forked child would otherwise repeat its parent's ids.
os.register_at_fork(after_in_child=process_ids.renew)
