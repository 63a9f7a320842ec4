"""`--tolerance-from`: a band per metric measured on repeats (tuimon.engine.judge.band,
tuimon.engine.analyses.band_from), judged by the one aligner."""

from __future__ import annotations

import random

from tuimon.engine.analyses.band_from import measure
from tuimon.engine.judge.align import PairAligner, compare_steps
from tuimon.engine.judge.band import Band
from tuimon.engine.judge.verdict import CLOSE, DIVERGED, IDENTICAL
from tuimon.steplog import Step

STEPS = 40  # more than a small block (`align.SMALL_BLOCK`): judged column-wise


def run(noise: random.Random, lr: float = 0.1, eps: float = 1e-6) -> list[Step]:
    """A loss of exp(-lr * step) with uniform noise up to `eps`, a fixed accuracy."""
    return [
        Step(s, {"loss": 2.0 ** (-lr * s) + noise.uniform(-eps, eps), "acc": s / 64})
        for s in range(STEPS)
    ]


def repeats(n: int = 6) -> list[list[Step]]:
    noise = random.Random(7)
    return [run(noise) for _ in range(n)]


def test_the_band_holds_every_repeat_it_was_measured_on() -> None:
    runs = repeats()
    band = measure({0: runs}, source="S")
    assert band.runs == 6 and band.steps == STEPS and not band.exact
    assert band.metrics["acc"] == (0.0, 0.0)
    loss_abs, loss_rel = band.metrics["loss"]
    assert 0 < loss_abs <= 2e-6 and loss_rel > 0
    for i, a in enumerate(runs):
        for b in runs[i + 1 :]:
            summary = compare_steps(a, b, band=band)[1].summary()
            assert summary.verdict in (IDENTICAL, CLOSE)
            assert summary.beyond is None


def test_a_changed_lr_leaves_the_band_and_is_named_with_it() -> None:
    runs = repeats()
    band = measure({0: runs}, source="S")
    changed = run(random.Random(1), lr=0.101)
    summary = compare_steps(runs[0], changed, band=band)[1].summary()
    assert summary.verdict == DIVERGED
    beyond = summary.beyond
    assert beyond is not None and beyond["metric"] == "loss" and beyond["step"] >= 1
    assert beyond["band"] == {"abs": band.metrics["loss"][0], "rel": band.metrics["loss"][1]}
    assert beyond["abs"] > band.metrics["loss"][0] or beyond["rel"] > band.metrics["loss"][1]
    assert summary.band is not None and summary.band["source"] == "S"


def test_a_metric_equal_in_every_repeat_must_stay_bitwise_equal() -> None:
    runs = repeats()
    band = measure({0: runs})
    other = [Step(r.step, {**r.metrics, "acc": r.metrics["acc"] + (1e-9 if r.step == 5 else 0)})
             for r in runs[1]]  # fmt: skip
    summary = compare_steps(runs[0], other, band=band)[1].summary()
    assert summary.verdict == DIVERGED
    assert summary.beyond is not None and summary.beyond["step"] == 5
    assert summary.beyond["metric"] == "acc" and summary.beyond["band"] == {"abs": 0.0, "rel": 0.0}


def test_block_and_row_judges_agree_under_a_band() -> None:
    runs = repeats()
    band = measure({0: runs[:3]})
    changed = run(random.Random(3), lr=0.1001)
    whole = compare_steps(runs[4], changed, band=band)[1].summary()
    one_by_one = PairAligner(0.0, None, band)
    for a, b in zip(runs[4], changed, strict=True):  # a row at a time: the small-block judge
        one_by_one.feed("a", a)
        one_by_one.feed("b", b)
    assert one_by_one.summary().to_dict() == whole.to_dict()


def test_repeats_bitwise_equal_give_a_bitwise_band() -> None:
    same = [Step(s, {"loss": 1.0 / (s + 1)}, digest="d") for s in range(5)]
    band = measure({0: [same, list(same)]})
    assert band.exact
    off = [Step(s, {"loss": 1.0 / (s + 1) + (1e-12 if s == 3 else 0)}, digest="d")
           for s in range(5)]  # fmt: skip
    summary = compare_steps(same, off, band=band)[1].summary()
    assert summary.verdict == DIVERGED and summary.beyond is not None
    assert summary.beyond["step"] == 3 and summary.beyond["tolerance"] == 0.0


def test_a_band_round_trips_and_a_damaged_one_is_none() -> None:
    band = measure({0: repeats(3), 1: repeats(2)}, source="S")
    assert band.seeds == [0, 1]
    assert Band.from_dict(band.to_dict()) == band
    inf = float("inf")
    for damaged in (None, [], {"metrics": 3}, {"metrics": {"loss": {"abs": -1, "rel": 0}}},
                    {"metrics": {"loss": {"abs": inf, "rel": 0}}}):  # fmt: skip
        assert Band.from_dict(damaged) is None
