"""The figure of pairs of several seeds (a sweep, `tuimon spread`): the first divergent step per
pair, the run-scale gaps beside the gaps between seeds, the reach curves, the key-frequency sets.
Black and white: sides by line style, kinds of gap by marker shape (filled / open)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from tuimon.engine.analyses.seed_gaps import Measure, SpreadResult, sentence
from tuimon.report.figure import STYLE, _figure, _thin
from tuimon.sanitize import clean

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

MARKERS = "osD^vP*Xh<>p"


def _labels(result: SpreadResult, sep: str = "\n") -> list[str]:
    """`seed 3` per pair, with the pair's name after it when a seed has more than one pair."""
    seeds = [p.seed for p in result.pairs]
    out = []
    for p in result.pairs:
        name = clean(p.name, 24)
        if name.split(" r")[0] == f"seed {p.seed}":  # a sweep's job: `seed 3 r2`
            out.append(name)
        else:
            out.append(f"seed {p.seed}" + (f"{sep}{name}" if seeds.count(p.seed) > 1 else ""))
    return out


def _first_steps(ax: Axes, result: SpreadResult) -> None:
    """The first divergent step of each pair; a pair that never parted marked `none`."""
    steps = [p.first_divergent for p in result.pairs]
    known = [s for s in steps if s is not None]
    top = max(known, default=1) or 1
    for i, s in enumerate(steps):
        if s is None:
            ax.plot(i, top, marker="^", fillstyle="none", color="black", markersize=8)
            ax.annotate("none", (i, top), xytext=(0, 6), textcoords="offset points",
                        ha="center", fontsize=8)  # fmt: skip
        else:
            ax.plot(i, s, marker="o", color="black", markersize=7)
            ax.annotate(f"{s:,}", (i, s), xytext=(6, 0), textcoords="offset points", fontsize=8)
    ax.set_xticks(range(len(steps)), _labels(result), fontsize=7)
    ax.set_ylabel("first divergent step")
    ax.set_ylim(bottom=0, top=top * 1.3 + 1)
    ax.set_xlim(-0.5, len(steps) - 0.5)
    ax.set_title("where each pair's sides first parted", fontsize=9)


def _gaps(ax: Axes, result: SpreadResult) -> None:
    """Each judged gap as a multiple of the median gap between seeds: between sides (filled
    circles) and between seeds (open squares), the verdict's limit dashed."""
    judged = [m for m in result.measures if m.judged]
    if not any(m.seed_median for m in judged):
        ax.text(0.5, 0.5, "no gap between seeds to measure against\n(give pairs of two or more "
                "seeds)", ha="center", va="center", transform=ax.transAxes)  # fmt: skip
    for i, m in enumerate(judged):
        scale = m.seed_median
        if not scale:
            continue
        for values, marker, fill, dx in (
            (m.sides, "o", "full", -0.12),
            (m.seeds, "s", "none", 0.12),
        ):
            y = np.array([v / scale if math.isfinite(v) else np.nan for v in values])
            ax.plot(np.full(y.size, i + dx), y, linestyle="none", marker=marker, color="black",
                    fillstyle=fill, markersize=7)  # fmt: skip
    ax.axhline(result.options.limit, color="black", linestyle="--", linewidth=1)
    ax.axhline(1.0, color="0.6", linestyle=":", linewidth=1)
    ax.plot([], [], "ko", label="between the sides of a pair")
    ax.plot([], [], "ks", fillstyle="none", label="between two seeds, same side")
    ax.plot([], [], "k--", label=f"verdict's limit ({result.options.limit:g})")
    ax.set_xticks(range(len(judged)), [_gap_label(m) for m in judged], fontsize=7)
    ax.set_xlim(-0.6, len(judged) - 0.4)
    ax.set_ylabel("gap / median gap between seeds")
    ax.legend(fontsize=7, loc="best", framealpha=0.6)
    ax.set_title("run-scale gaps: sides against seeds", fontsize=9)


def _gap_label(m: Measure) -> str:
    """The measure's name and its ratio (sides' median / seeds' median)."""
    r = m.ratio
    ratio = "–" if r is None else ("inf" if math.isinf(r) else f"{r:.2f}")
    return f"{m.name.replace(' (', chr(10) + '(')}\nratio {ratio}"


def _reach(ax: Axes, result: SpreadResult) -> None:
    """The metric that 'reached' reads, every pair (a solid, b dashed; a marker per pair)."""
    o = result.options
    for i, (p, who) in enumerate(zip(result.pairs, _labels(result, " "), strict=True)):
        for side, run in p.sides.items():
            s = run.series.get(o.metric)
            if s is None or not s.steps.size:
                continue
            x, y = _thin(s)
            ax.plot(x, y, **STYLE[side], linewidth=1, marker=MARKERS[i % len(MARKERS)],
                    markevery=max(1, x.size // 6), markersize=4,
                    fillstyle="full" if side == "a" else "none",
                    label=f"{who} {side}")  # fmt: skip
    ax.axhline(o.threshold, color="black", linestyle=":", linewidth=1)
    reached = [r.reached(o.metric, o.threshold) for p in result.pairs for r in p.sides.values()]
    if reached and all(r is not None for r in reached):  # show the climb, not the long tail
        ax.set_xlim(right=2 * max(r for r in reached if r is not None) + 1)
    ax.set_xlabel("step")
    ax.set_ylabel(o.metric)
    ax.legend(fontsize=6, ncol=2)
    ax.set_title(f"{o.metric} (dotted: {o.threshold:g}, 'reached')", fontsize=9)


def _sets(ax: Axes, result: SpreadResult) -> None:
    """Which frequencies each side of each pair ends on: a filled cell is in the set."""
    labels = _labels(result, " ")
    rows = [(p, side) for p in result.pairs for side in ("a", "b")]
    freqs = sorted({k for p, side in rows for k in (p.sides[side].freqs or ())})
    if not freqs:
        ax.text(0.5, 0.5, "no key frequencies", ha="center", transform=ax.transAxes)
        return
    grid = np.array([[k in (p.sides[side].freqs or ()) for k in freqs] for p, side in rows])
    ax.imshow(grid, cmap="Greys", vmin=0, vmax=1.3, aspect="auto")
    ax.set_xticks(range(len(freqs)), [str(k) for k in freqs], fontsize=7)
    names = [f"{who} {side}" for who in labels for side in ("a", "b")]
    ax.set_yticks(range(len(rows)), names, fontsize=7)
    ax.set_xticks(np.arange(-0.5, len(freqs)), minor=True)
    ax.set_yticks(np.arange(-0.5, len(rows)), minor=True)
    ax.grid(which="minor", color="0.7", linewidth=0.5)
    ax.set_xlabel("frequency k (filled: in the side's key-frequency set)")
    c = result.freq_counts
    ax.set_title(f"key-frequency sets: the sides agree in {c['pairs_agree']} of {c['pairs']} pairs",
                 fontsize=9)  # fmt: skip


def spread_figure(result: SpreadResult) -> Figure:
    """Pairs of several seeds: first divergent steps, gaps, reach curves, key-frequency sets."""
    fig = _figure(2, 2, (12, 8.5))
    ax = fig.axes
    _first_steps(ax[0], result)
    _gaps(ax[1], result)
    _reach(ax[2], result)
    _sets(ax[3], result)
    why = result.reasons[:1] + ([f"{len(result.reasons) - 1} more"] if result.reasons[1:] else [])
    verdict = result.verdict + (f" ({'; '.join(why)})" if why else "")
    text = clean(f"{verdict}: {sentence(result)}", 400)
    fig.suptitle(_wrap(text, 130), fontsize=9)
    return fig


def _wrap(text: str, width: int) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width))
