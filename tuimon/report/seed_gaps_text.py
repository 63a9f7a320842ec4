"""`tuimon spread` for people: the pairs, the gaps between sides and between seeds, the rule and
the verdict (every name from a run or a path is shown as data, cleaned of control characters)."""

from __future__ import annotations

import math
from typing import Any

from tuimon.engine.analyses.pair_runs import PairRun
from tuimon.engine.analyses.seed_gaps import Measure, SpreadResult, rule, sentence
from tuimon.sanitize import clean


def _g(x: float | None, unit: str = "") -> str:
    if x is None:
        return "–"
    if math.isinf(x):
        return "never on one side"
    return f"{x:,.0f}{unit}" if unit else f"{x:.3g}"


def _side_cell(p: PairRun, metric: str, threshold: float) -> str:
    a, b = (p.sides[s].reached(metric, threshold) for s in "ab")
    return " / ".join("never" if x is None else f"{x:,}" for x in (a, b))


def _freqs(p: PairRun) -> str:
    fa, fb = p.sides["a"].freqs, p.sides["b"].freqs
    if not fa or not fb:
        return "–"
    shown = " ".join(map(str, sorted(fa)))
    if set(fa) == set(fb):
        return f"{shown} (agree)"
    return f"{shown} | {' '.join(map(str, sorted(fb)))}"


def pair_lines(result: SpreadResult) -> list[str]:
    """One block per pair: seed, what differs, first divergent step, reach steps, key freqs."""
    o = result.options
    out = []
    for p in result.pairs:
        first = "none" if p.first_divergent is None else f"{p.first_divergent:,}"
        differs = clean(", ".join(p.differs), 200) or "no difference recorded in pair.json"
        cut = [r.cut for r in p.sides.values() if r.cut]
        name = clean(p.name, 120)
        who = name if name.split(" r")[0] == f"seed {p.seed}" else f"{name}  seed {p.seed}"
        out.append(f"{who}  a vs b: {differs}")
        out.append(
            f"    {p.verdict}, first divergent step {first}; {o.metric} >= {o.threshold:g} at "
            f"{_side_cell(p, o.metric, o.threshold)}; key frequencies {_freqs(p)}"
            + (f"; {clean('; '.join(cut), 300)}" if cut else "")
        )
    return out


def _measure_line(m: Measure, unit: str) -> str:
    seeds = f"{_g(m.seed_median, unit)} ({len(m.seeds)})" if m.seeds else "–"
    reps = f"{_g(m.repeat_median, unit)} ({len(m.repeats)})" if m.repeats else "–"
    ratio = "–" if m.ratio is None else ("inf" if math.isinf(m.ratio) else f"{m.ratio:.2f}")
    judged = "" if m.judged else "  (shown, not judged)"
    note = f"  ({m.note})" if m.note else ""
    sides = f"{_g(m.side_median, unit)} ({len(m.sides)})" if m.sides else "–"
    return f"  {m.name:<40} {sides:>18} {seeds:>18} {reps:>14} {ratio:>6}{judged}{note}"


def measure_lines(result: SpreadResult) -> list[str]:
    """The gaps: medians (and how many comparisons) between sides, seeds, repeats; ratio."""
    head = f"  {'gap (median, n)':<40} {'between sides':>18} {'between seeds':>18} "
    out = [head + f"{'repeats':>14} {'ratio':>6}"]
    for m in result.measures:
        out.append(_measure_line(m, " steps" if m.name.startswith("steps to") else ""))
    c = result.freq_counts
    if c["pairs"]:
        line = f"  key-frequency sets: the sides agree in {c['pairs_agree']} of {c['pairs']} pairs"
        if c["seed_comparisons"]:
            line += (f"; two seeds (same side) have the same set in "
                     f"{c['seed_comparisons_same_set']} of {c['seed_comparisons']} comparisons "
                     f"and share {c['seeds_share_mean']:.1f} of {c['top']} on average")  # fmt: skip
        out.append(line)
    return out


def text(result: SpreadResult) -> str:
    """The whole report, verdict last."""
    seeds = " ".join(map(str, result.seeds)) or "none"
    lines = [f"spread: {len(result.pairs)} pairs, seeds {seeds}", *pair_lines(result)]
    varied = {tuple(d.split(" ", 1)[0] for d in p.differs) for p in result.pairs}
    if len(varied) > 1:
        lines.append("  note: the pairs do not vary the same thing between their sides")
    lines.append("")
    lines += [*measure_lines(result), "", f"rule: {rule(result.options)}"]
    lines += [f"  why {result.verdict}: {clean(r, 300)}" for r in result.reasons]
    check = " — fails the report (--check-seeds)" if result.options.check_seeds else ""
    lines += [clean(s.text(), 300) + check for s in result.same_seeds]
    lines.append(f"{result.verdict}: {sentence(result)}")
    return "\n".join(lines)


def as_dict(result: SpreadResult) -> dict[str, Any]:
    """The report as JSON."""
    o = result.options
    return {
        "verdict": result.verdict,
        "sentence": sentence(result),
        "rule": rule(o),
        "reasons": result.reasons,
        "metric": o.metric,
        "threshold": o.threshold,
        "ratio_limit": o.limit,
        "seeds": result.seeds,
        "pairs": [_pair_dict(p, result) for p in result.pairs],
        "measures": [m.to_dict() for m in result.measures],
        "key_frequency_sets": result.freq_counts,
        "check_seeds": o.check_seeds,
        "seeds_not_applied": [s.to_dict() for s in result.same_seeds],
        "exit_code": result.exit_code,
    }


def _pair_dict(p: PairRun, result: SpreadResult) -> dict[str, Any]:
    o = result.options
    sides = {
        s: {
            "device": r.device,
            "last_step": r.last_step,
            "planned_steps": r.planned,
            "cut_short": r.cut,
            "reached": r.reached(o.metric, o.threshold),
            "final": {k: r.final(k) for k in ("train_loss", "test_loss", "train_acc", "test_acc")},
            "key_freqs": list(r.freqs) if r.freqs else None,
            "key_freqs_from": r.freq_source,
            "emb": r.emb_note or "saved",
        }
        for s, r in p.sides.items()
    }
    return {
        "name": p.name,
        "path": str(p.path),
        "seed": p.seed,
        "verdict": p.verdict,
        "first_divergent_step": p.first_divergent,
        "first_divergent_metrics": p.first_metrics,
        "first_tensors": p.first_tensors,
        "differs": p.differs,
        "sides": sides,
    }
