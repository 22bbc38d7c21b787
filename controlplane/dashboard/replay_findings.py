"""What an outage replay batch shows, in sentences computed from its figures, and what it assumes.

The Outages page and the incident page print these instead of fixed claims, so a page never
says more than its own numbers do (docs/adr/0078-page-findings-are-computed-from-the.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from breakers.replay.outage import FLEET_MODES, REMOVAL_MODES, ReplayResult, Scenario
from controlplane.dashboard.economics import OutageComparison
from runs.incident_runs import IncidentMeasures
from runs.outage_economics import TIMES, PeriodStats, percent_change, percent_text

__all__ = (
    "ReplayFindings",
    "SensitivityRow",
    "incident_findings",
    "replay_findings",
)


@dataclass(frozen=True)
class SensitivityRow:
    mode: str
    cells: list[tuple[int, float, str]]  # (wrap-up steps, spend $, share of none's spend)


@dataclass(frozen=True)
class ReplayFindings:
    findings: list[str]
    assumptions: list[str]
    wrap_up_steps: int | None  # what the replay's model was told to take; None: before issue 14
    sensitivity: list[SensitivityRow]
    floors: list[tuple[int, str]]  # (wrap-up steps, least share of none's spend)
    paused_s: float = 0.0  # real seconds the batch's clock waited for the control plane


def _pct(part: float, whole: float) -> str:
    share = part / whole * 100
    return f"{share:.1f}%" if share < 9.95 else f"{share:.0f}%"


def _change(before: float, after: float) -> str:
    """ "rose by 520%": the same change, rounded the same way, as the charts' "+520%"."""
    change = percent_change(before, after)
    if change is None:
        return "did not change" if after == before else f"went from $0 to ${after:,.2f}"
    text = percent_text(change)
    if text == "0%":
        return "did not change"
    return f"{'rose' if change > 0 else 'fell'} by {text.lstrip('+-')}"


def _factor(before: float, after: float) -> str:
    if before <= 0 or after <= 0:
        return "no"
    ratio = before / after
    if ratio >= 1:
        return f"{ratio:.1f}{TIMES} faster" if ratio < 9.95 else f"{ratio:.0f}{TIMES} faster"
    return f"{1 / ratio:.1f}{TIMES} slower"


def replay_findings(comparison: OutageComparison) -> ReplayFindings:
    """Sentences and the sensitivity table from one batch's summaries (the command's figures)."""
    summaries = {m.replay.mode: ReplayResult.of(m.replay) for m in comparison.modes}
    first = ReplayResult.of(comparison.batch.first)
    spend = {mode: s.model_spend_usd for mode, s in summaries.items()}
    calls = {mode: s.web_search_calls for mode, s in summaries.items()}
    runs = {mode: s.runs for mode, s in summaries.items()}
    durations = {mode: s.mean_run_duration_s for mode, s in summaries.items()}
    findings: list[str] = []
    none_spend = spend.get("none")
    if none_spend and durations.get("none") and "fail-fast" in summaries:
        ff_spend, ff_duration = spend.get("fail-fast"), durations.get("fail-fast")
        if ff_spend is not None and ff_duration:
            findings.append(
                f"Failing fast (fail-fast) made outage-window runs "
                f"{_factor(durations['none'] or 0, ff_duration)} than no breaker, and total model "
                f"spend {_change(none_spend, ff_spend)} (${none_spend:,.2f} to ${ff_spend:,.2f})."
            )
    for mode in REMOVAL_MODES:
        mine, vendor = spend.get(mode), calls.get(mode)
        if none_spend and mine is not None and vendor is not None:
            findings.append(
                f"Mode {mode} spent {_pct(mine, none_spend)} of mode none's model spend "
                f"(${mine:,.2f} against ${none_spend:,.2f}) and sent {vendor:,.0f} calls to the "
                f"failing vendor (none: {calls.get('none') or 0:,.0f})."
            )
    ff, fleet = spend.get("fail-fast"), spend.get("fleet")
    if ff and fleet is not None:
        findings.append(
            f"Removing the tool is worth ${ff - fleet:,.2f} here: fleet and fail-fast use the "
            f"same fleet breaker and differ only in removing the tool instead of refusing it "
            f"(fleet spent {_pct(fleet, ff)} of fail-fast's ${ff:,.2f})."
        )
    findings += _recovery_findings(summaries)
    steps = first.wrap_up_steps
    fleet_summary = summaries.get("fleet")
    floor_table = fleet_summary.floor_spend_by_wrap_up_steps if fleet_summary else {}
    floor = floor_table.get(steps) if steps is not None else None
    if none_spend and fleet is not None and floor is not None and steps is not None:
        findings.append(
            f"With a model that takes {steps} step{'s' if steps != 1 else ''} to finish without "
            f"the tool, these runs could not cost less than {_pct(floor, none_spend)} of mode "
            f"none even if every one lost the tool at its first step; fleet's "
            f"{_pct(fleet, none_spend)} is what detection adds above that floor."
        )
    sensitivity = []
    for mode in REMOVAL_MODES:
        result = summaries.get(mode)
        table = result.spend_by_wrap_up_steps if result else {}
        cells = [(n, usd, _pct(usd, none_spend)) for n, usd in table.items()] if none_spend else []
        if cells:
            sensitivity.append(SensitivityRow(mode=mode, cells=cells))
    floors = [(n, _pct(usd, none_spend)) for n, usd in floor_table.items()] if none_spend else []
    return ReplayFindings(
        findings=findings,
        assumptions=_assumptions(first.scenario, steps, runs.get("none")),
        wrap_up_steps=steps,
        sensitivity=sensitivity,
        floors=floors,
        paused_s=sum(s.paused_real_s or 0.0 for s in summaries.values()),
    )


def _recovery_findings(summaries: dict[str, ReplayResult]) -> list[str]:
    """How long each mode kept the recovered tool away, and who closed the control plane's
    breaker: an agent's half-open trial, or the replay's reset (with its reason)."""
    lags = [
        f"{mode} {lag:,.0f} s"
        for mode, result in summaries.items()
        if (lag := result.number("recovery_lag_s")) is not None
    ]
    sentences = []
    if lags:
        sentences.append(
            "After the vendor came back, web_search was offered and working again after: "
            f"{', '.join(lags)}."
        )
    for mode, result in summaries.items():
        reason = result.figures.get("fleet_reset_reason")
        if reason and mode in FLEET_MODES:
            sentences.append(
                f"In mode {mode} the fleet breaker did not close by itself ({reason}); the "
                "replay reset it."
            )
    reset = [m for m, r in summaries.items() if r.figures.get("fleet_reset_reason")]
    others = [m for m in reset if m not in FLEET_MODES]
    if others:
        many = len(others) > 1
        sentences.append(
            f"{'Modes' if many else 'Mode'} {', '.join(others)} never "
            f"{'consult' if many else 'consults'} the fleet breaker, so nothing of "
            f"{'theirs' if many else 'its'} could close what the failures opened on the control "
            f"plane: the replay reset it after {'each' if many else 'it'}, and the incident "
            "says so."
        )
    return sentences


def _assumptions(story: Scenario, steps: int | None, runs: float | None) -> list[str]:
    value = lambda name: getattr(story, name)  # noqa: E731
    budget = story.step_budget
    wrap = (
        f"Once the tool is gone the model takes {steps} model call{'s' if steps != 1 else ''} "
        "to finish with what it has (--wrap-up-steps; 1 means it answers on that same step)."
        if steps is not None
        else "This replay predates --wrap-up-steps: its model answered on the very step it "
        "lost the tool (1 step), the cheapest possible assumption."
    )
    return [
        "The model is scripted, not a paid LLM. It reads what it is sent: it calls web_search "
        "only when web_search is in that step's tools array and the notice does not say it is "
        "gone.",
        f"While the vendor is down every web_search call fails after "
        f"{value('failing_attempts')} HTTP attempts and {value('failing_call_s'):g} s. After a "
        f"failure the model re-phrases and searches again on "
        f"{value('rephrase_probability'):.0%} of its steps (it re-reads a page otherwise), until "
        f"its {budget}-step budget ends.",
        "A fail-fast refusal is read exactly like a failure: the model retries. A model that "
        "gave up on a refusal would make fail-fast cheaper, so the fail-fast row is the most "
        "that removing the tool can be worth against a plain breaker.",
        wrap,
        f"Every model call costs the same in every mode: {value('base_input_tokens'):,} input "
        f"tokens plus {value('input_tokens_per_step'):,} per earlier step, "
        f"{value('output_tokens')} output, at ${value('usd_per_million_input')} and "
        f"${value('usd_per_million_output')} per million; a full {budget}-step run costs about "
        f"${story.run_cost(budget):.2f}.",
        f"Runs start evenly through the window{f' ({runs:,.0f} of them)' if runs else ''}, early "
        "enough to finish inside it with every search failing, as the story's runs did; later "
        "runs belong to the recovery after the vendor comes back.",
    ]


def incident_findings(
    *,
    during: IncidentMeasures,
    before: IncidentMeasures,
    spend_during: PeriodStats,
    spend_before: PeriodStats,
) -> list[str]:
    """The incident page's sentences: its table's figures in words, and the change in spend
    per run over the same runs, with the same denominator, as the chart's headline
    (``spend_*``: the chart's periods, whole finished runs before and during)."""
    sentences = []
    now, then = spend_during.mean_spend_usd, spend_before.mean_spend_usd
    if spend_during.runs and spend_before.runs and now is not None and then is not None:
        sentences.append(
            f"Model spend per run {_change(then, now)} (${then:,.2f} before, ${now:,.2f} "
            "during: the mean of the finished runs, as in the chart)."
        )
    elif during.runs and not before.runs:
        sentences.append("No run reached for the tool in the same length of time before it.")
    if during.tool_calls:
        share = during.blocked / during.tool_calls
        sentences.append(
            f"{during.vendor_calls:,} calls reached the vendor during the incident "
            f"({before.vendor_calls:,} before); {share:.0%} of the calls the models asked for were "
            "refused by a breaker without reaching it."
        )
    if during.blocked and during.runs:
        sentences.append(
            "Refused calls are cheap in time only: each was still asked for by a model call "
            "that is paid for."
        )
    return sentences
