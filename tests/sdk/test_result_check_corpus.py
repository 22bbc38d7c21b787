"""The labelled control set (scripts/testing/result_corpus.py): healthy traffic, legitimately
empty answers included, opens nothing; each kind of failure is caught (goal: recall >= 0.8).
The figures themselves are in docs/benchmarks.md (bench/bench_result_checks.py)."""

from __future__ import annotations

from scripts.testing.result_corpus import HEALTHY, KINDS, evaluate, failures, healthy


def test_the_control_set_is_big_enough_and_labelled() -> None:
    items = healthy()
    assert len(items) >= 200
    assert {item.label for item in items} == {HEALTHY}
    assert sum(item.tool in ("flights", "calendar") for item in items) >= 40  # empty on purpose
    assert set(failures()) == set(KINDS)


def test_healthy_traffic_opens_nothing_and_each_kind_is_caught() -> None:
    result = evaluate()
    assert result.false_opens == 0
    assert result.false_degraded <= result.healthy * 0.01
    for kind in KINDS:
        assert result.counted[kind] >= 8
        assert result.recall[kind] >= 0.8, kind
