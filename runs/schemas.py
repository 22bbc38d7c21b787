"""The event contract (docs/api.md): one pydantic model per event type, the batch and the reply.

The same models validate each event and document the API in the OpenAPI schema, so the docs cannot
drift from what is enforced. Events are validated one by one (not as one list) so that a bad event
is rejected on its own while the valid events of the same batch are kept.

Limits (docs/api.md): identifiers 1-200 characters without control characters; error and reason
texts are cut to ``MAX_TEXT_CHARS`` with an ellipsis rather than refused; counts are non-negative
32-bit integers. Unknown fields are ignored so that a newer SDK can talk to an older server.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)

from breaker_panel.vocabulary import AUTOMATIC_STATES, FINISHED_STATUSES, OUTCOMES, SCOPES, STATES

MAX_ID_CHARS = 200
MAX_TEXT_CHARS = 2000
MAX_COUNT = 2_147_483_647  # PostgreSQL integer
MAX_COST_USD = 999_999.0  # ModelCall.cost_usd is DECIMAL(12, 6)
ELLIPSIS = "…"

# Control characters and lone surrogates: PostgreSQL refuses NUL, UTF-8 cannot encode surrogates,
# and neither belongs in a name that is shown on the dashboard.
_BAD_ID_CHARS = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")


def check_identifier(value: str) -> str:
    if _BAD_ID_CHARS.search(value):
        raise ValueError("must not contain control characters or unpaired surrogates")
    return value


def clip_text(value: str) -> str:
    """Make free text storable and bounded: long texts are cut, never refused."""
    if len(value) > MAX_TEXT_CHARS:
        value = value[: MAX_TEXT_CHARS - 1] + ELLIPSIS
    if "\x00" in value:
        value = value.replace("\x00", "\ufffd")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        value = value.encode("utf-8", "replace").decode("utf-8")
    return value


# Checked inside pydantic-core (fast); a lone surrogate already fails its str conversion.
NO_CONTROL_CHARS = r"^[^\x00-\x1f\x7f]*$"
Identifier = Annotated[
    str,
    StringConstraints(strict=True, min_length=1, max_length=MAX_ID_CHARS, pattern=NO_CONTROL_CHARS),
]
OptionalName = Annotated[
    str, StringConstraints(strict=True, max_length=MAX_ID_CHARS, pattern=NO_CONTROL_CHARS)
]
FreeText = Annotated[str, Field(strict=True), AfterValidator(clip_text)]
Count = Annotated[int, Field(strict=True, ge=0, le=MAX_COUNT)]
PositiveCount = Annotated[int, Field(strict=True, ge=1, le=MAX_COUNT)]

# The contract words come from the SDK (breaker_panel.vocabulary), the one place they are spelt.
if TYPE_CHECKING:  # mypy cannot read a Literal built from a tuple; pydantic can
    type OutcomeName = str
    type ReportedScope = str
    type ReportedState = str
    type FinishedStatus = str
    type FleetStateName = str
else:
    OutcomeName = Literal[OUTCOMES]
    ReportedScope = Literal[SCOPES]
    ReportedState = Literal[AUTOMATIC_STATES]
    FinishedStatus = Literal[FINISHED_STATUSES]
    FleetStateName = Literal[STATES]
# A run reports the fleet scope only as "this run lost the tool to the fleet breaker" (with its
# run_id); the fleet's own state is decided by the control plane, never by agents.
# Agents' run and worker breakers only close, open and half-open; forced states are operator
# actions and fleet transitions are decided by the control plane, so agents cannot report them.


# Agents' clocks are not ours, but a time outside these bounds is a bug, not a clock skew: it
# would not fit the pages' arithmetic (or, past year 9999 in UTC, Python's datetime at all).
MIN_TS = datetime(1970, 1, 1, tzinfo=UTC)
MAX_TS = datetime(2500, 1, 1, tzinfo=UTC)

# Any UTC offset pydantic can parse is accepted; the bounds are compared in UTC inside
# pydantic-core (no Python call per event), and the writers store the time as UTC
# (``runs.writers``; PostgreSQL itself takes offsets only up to 15:59).
Timestamp = Annotated[AwareDatetime, Field(ge=MIN_TS, lt=MAX_TS)]


class _Event(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    id: Identifier = Field(description="Client-made, unique per event; a resent id is a duplicate.")
    ts: Timestamp = Field(
        description="When it happened, ISO 8601 with a timezone, between 1970 and 2500 (UTC)."
    )


class RunStartedEvent(_Event):
    type: Literal["run.started"]
    run_id: Identifier
    agent: Identifier
    step_budget: PositiveCount | None = None


# A token count is any whole number here: one that is absent, negative, absurd or larger than
# the input it is part of does not reject the call (its spend and step still count); the call is
# stored with its tokens unknown and, without a cost, its price unknown (runs.pricing).
TokenCount = Annotated[int, Field(strict=True)]


class ModelCallEvent(_Event):
    type: Literal["model.call"]
    run_id: Identifier
    step: Count | None = None
    model: OptionalName = ""
    provider: OptionalName = Field(
        default="",
        description="Optional: the model's provider (e.g. 'anthropic'), to find its price.",
    )
    input_tokens: TokenCount | None = Field(
        default=None, description="All input tokens, cache reads and writes included."
    )
    output_tokens: TokenCount | None = None
    cache_read_tokens: TokenCount | None = Field(
        default=None, description="Optional: the part of input_tokens read from the prompt cache."
    )
    cache_write_tokens: TokenCount | None = Field(
        default=None, description="Optional: the part of input_tokens written to the prompt cache."
    )
    cost_usd: (
        Annotated[float, Field(strict=True, ge=0, le=MAX_COST_USD, allow_inf_nan=False)] | None
    ) = Field(
        default=None,
        description="Optional: when absent the control plane prices the tokens with the "
        "genai-prices table (cache reads and writes at their own rates), or marks it unknown.",
    )
    duration_ms: Count | None = None


class ToolCallEvent(_Event):
    type: Literal["tool.call"]
    run_id: Identifier
    step: Count | None = None
    tool: Identifier
    outcome: OutcomeName
    attempts: Count | None = Field(
        default=None, description="HTTP attempts inside the call; default 0 if blocked, else 1."
    )
    duration_ms: Count | None = None
    error: FreeText = Field(default="", description=f"Cut to {MAX_TEXT_CHARS} characters.")
    trial: Annotated[bool, Field(strict=True)] = Field(
        default=False,
        description="Set by the SDK on the one call made under a fleet trial lease.",
    )


class BreakerTransitionEvent(_Event):
    type: Literal["breaker.transition"]
    run_id: Identifier | None = Field(
        default=None, description="Required when scope is 'run' or 'fleet'."
    )
    scope: ReportedScope
    tool: Identifier
    state: ReportedState
    reason: FreeText = Field(default="", description=f"Cut to {MAX_TEXT_CHARS} characters.")

    @model_validator(mode="after")
    def _run_scope_needs_run(self) -> BreakerTransitionEvent:
        if self.scope in ("run", "fleet") and self.run_id is None:
            raise ValueError(f"run_id is required when scope is {self.scope!r}")
        if self.scope == "fleet" and self.state != "open":
            raise ValueError("a fleet-scope report can only say that a run lost the tool (open)")
        return self


class RunFinishedEvent(_Event):
    type: Literal["run.finished"]
    run_id: Identifier
    status: FinishedStatus
    degraded: Annotated[bool, Field(strict=True)] = False
    steps: Count | None = None


AnyEvent = (
    RunStartedEvent | ModelCallEvent | ToolCallEvent | BreakerTransitionEvent | RunFinishedEvent
)
EVENT_MODELS: dict[str, type[_Event]] = {
    "run.started": RunStartedEvent,
    "model.call": ModelCallEvent,
    "tool.call": ToolCallEvent,
    "breaker.transition": BreakerTransitionEvent,
    "run.finished": RunFinishedEvent,
}
EVENT_TYPES = tuple(EVENT_MODELS)


class DroppedReport(BaseModel):
    """Events the client had to drop because its buffer was full. Counted once per ``id``
    (a resent report is a duplicate like any event); ``count`` is the number since its last
    report."""

    model_config = ConfigDict(extra="ignore")

    id: Identifier
    count: PositiveCount


class EventBatch(BaseModel):
    """The body of ``POST /api/v1/events`` (for the docs: events are checked one by one)."""

    worker_id: Identifier
    events: list[Annotated[AnyEvent, Field(discriminator="type")]]
    dropped: DroppedReport | None = Field(
        default=None, description="Optional: events the client dropped since its last report."
    )


class Rejected(BaseModel):
    index: int = Field(description="Position of the event in the batch, from 0.")
    id: str | None = Field(description="The event's id, when it had a usable one.")
    reason: str


class FleetTool(BaseModel):
    state: FleetStateName
    since: datetime | None = None
    reason: str = ""
    forced: bool = False


class FleetState(BaseModel):
    version: int
    tools: dict[str, FleetTool]


class IngestReply(BaseModel):
    accepted: int = Field(description="Events written by this request.")
    duplicates: int = Field(description="Events already written by an earlier request.")
    rejected: list[Rejected]
    fleet: FleetState


class ErrorReply(BaseModel):
    detail: str


def event_batch_openapi() -> dict[str, Any]:
    """The request body for the OpenAPI schema; the handler reads the raw body itself."""
    schema = EventBatch.model_json_schema()
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": _inline_refs(schema, schema.pop("$defs"))}},
        }
    }


def _inline_refs(node: Any, defs: dict[str, Any]) -> Any:
    # The operation's schema sits inside the OpenAPI document, where pydantic's "#/$defs/..."
    # references would not resolve; the event models are not recursive, so inlining is finite.
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inline_refs(defs[ref.removeprefix("#/$defs/")], defs)
        # A discriminator's "mapping" names the same unresolvable refs; "propertyName" suffices.
        return {
            key: _inline_refs(value, defs)
            for key, value in node.items()
            if not (key == "mapping" and "propertyName" in node)
        }
    if isinstance(node, list):
        return [_inline_refs(item, defs) for item in node]
    return node
