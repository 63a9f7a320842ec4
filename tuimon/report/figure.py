"""Figures for a lab note (`tuimon plot`): a pair, or pairs of several seeds (a sweep, spread).

matplotlib is an optional extra (`pip install -e ".[plot]"` in the checkout), imported here
lazily, without pyplot (no display, no global state). Every figure reads in black and white:
the two sides differ by line style (a solid, b dashed) and the markers by shape (filled /
open), not by colour alone.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tuimon.engine.analyses.pair_runs import PairRun, Series, SideRun
from tuimon.errors import TuimonError
from tuimon.freqs import FreqError, as_embedding, energies
from tuimon.sanitize import clean

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

FORMATS = (".svg", ".png", ".pdf")
MAX_POINTS = 2000
"""Points per line drawn (a longer series is thinned; the divergence keeps each bucket's max)."""
STYLE: dict[str, dict[str, Any]] = {
    "a": {"linestyle": "-", "color": "black"},
    "b": {"linestyle": "--", "color": "0.45"},
}
METRIC_MARKS = {"train": "o", "test": "s"}


class PlotError(TuimonError):
    """A figure that cannot be made (no matplotlib, a file type it does not write)."""


def _figure(rows: int, cols: int, size: tuple[float, float]) -> Figure:
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise PlotError(
            "tuimon plot needs matplotlib: pip install matplotlib "
            '(in the tuimon checkout: pip install -e ".[plot]")'
        ) from None
    fig = Figure(figsize=size, layout="constrained")
    fig.subplots(rows, cols)
    return fig


def check_output(path: Path) -> None:
    """PlotError unless the file type is one the figure is written as."""
    if path.suffix.lower() not in FORMATS:
        raise PlotError(f"{path}: give a file ending in {', '.join(FORMATS)}")


def _thin(s: Series, keep_max: bool = False, head: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """At most about MAX_POINTS points of a series: the first `head` as they are, then every
    k-th (or, `keep_max`, each bucket's largest value, so no peak is lost)."""
    n = s.steps.size
    if n <= MAX_POINTS + head:
        return s.steps, s.values
    k = math.ceil((n - head) / MAX_POINTS)
    starts = np.concatenate([np.arange(head), np.arange(head, n, k)])
    if keep_max:
        return s.steps[starts], np.maximum.reduceat(s.values, starts)
    return s.steps[starts], s.values[starts]


def _curves(ax: Axes, pair: PairRun, names: tuple[str, str], ylabel: str, log: bool) -> None:
    """Train and test curves of both sides (a solid, b dashed; train circles, test squares)."""
    drawn = False
    for side, run in pair.sides.items():
        for name in names:
            s = run.series.get(name)
            if s is None or not s.steps.size:
                continue
            x, y = _thin(s)
            if log:
                keep = y > 0
                x, y = x[keep], y[keep]
            marker = METRIC_MARKS["test" if name.startswith("test") else "train"]
            ax.plot(x, y, **STYLE[side], marker=marker, markevery=max(1, x.size // 8),
                    markersize=4, fillstyle="full" if side == "a" else "none", linewidth=1,
                    label=f"{name}, side {side}")  # fmt: skip
            drawn = True
    if log and drawn:
        ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_xlabel("step")
    if drawn:
        ax.legend(fontsize=7)
    else:
        ax.text(0.5, 0.5, f"no {' or '.join(names)} logged", ha="center", transform=ax.transAxes)


def _divergence(ax: Axes, pair: PairRun) -> None:
    """The divergence per step on a log scale, the first divergent step marked."""
    if pair.divergence is not None and pair.divergence.steps.size:
        x, y = _thin(pair.divergence, keep_max=True, head=200)  # log x: the start in full
        keep = y > 0
        if keep.any():
            ax.plot(x[keep], y[keep], color="black", linewidth=1, label="divergence (max rel)")
            ax.set_yscale("log")
            ax.set_xscale("symlog", linthresh=10)  # an early first step stays visible
            ax.set_xlim(left=0)
        else:
            n = pair.divergence.steps.size
            ax.text(0.5, 0.5, f"no divergence: all {n:,} steps compared are equal", ha="center",
                    transform=ax.transAxes)  # fmt: skip
    if pair.first_divergent is not None:
        ax.axvline(pair.first_divergent, color="black", linestyle=":", linewidth=1.5)
        ax.annotate(f"first divergent step {pair.first_divergent:,}",
                    (pair.first_divergent, 0.97), xycoords=("data", "axes fraction"),
                    xytext=(5, 0), textcoords="offset points", fontsize=8, va="top",
                    bbox={"facecolor": "white", "edgecolor": "none", "pad": 1})  # fmt: skip
    ax.set_xlabel("step (linear to 10, then log)")
    ax.set_ylabel("divergence between a and b (log)")


def _energy(run: SideRun) -> np.ndarray | None:
    """Each frequency's share of W_E's squared norm (None without a readable W_E)."""
    if run.emb is None:
        return None
    try:
        emb = as_embedding(run.emb, p=run.p)
    except FreqError:
        return None
    e = energies(emb.matrix)
    return np.asarray(e[1:] / e.sum())


def _freq_panel(ax: Axes, pair: PairRun) -> None:
    """W_E's energy per frequency at the end, both sides (a filled, b hatched), the key sets
    named in the title; without W_E, the logged key frequencies over the steps."""
    shares = {side: _energy(run) for side, run in pair.sides.items()}
    looks: dict[str, dict[str, Any]] = {
        "a": {"color": "black"},
        "b": {"color": "white", "edgecolor": "black", "hatch": "////"},
    }
    if any(v is not None for v in shares.values()):
        for (side, share), dx in zip(shares.items(), (-0.2, 0.2), strict=True):
            if share is not None:
                k = np.arange(1, share.size + 1)
                ax.bar(k + dx, share, width=0.4, label=f"side {side}", **looks[side])
        ax.set_xlabel("frequency k")
        ax.set_ylabel("share of W_E's squared norm")
        ax.legend(fontsize=7)
    else:
        _logged_freqs(ax, pair)
    sets = [" ".join(map(str, sorted(r.freqs))) if r.freqs else "–" for r in pair.sides.values()]
    fa, fb = (r.freqs for r in pair.sides.values())
    verdict = (
        "cannot compare" if not fa or not fb else ("agree" if set(fa) == set(fb) else "differ")
    )
    sets = [f"{{{x}}}" if x != "–" else "– (none)" for x in sets]
    ax.set_title(f"key frequencies a {sets[0]} · b {sets[1]}: {verdict}", fontsize=9)


def _logged_freqs(ax: Axes, pair: PairRun) -> None:
    drawn = False
    for side, run in pair.sides.items():
        for name, s in run.series.items():
            if name.startswith("key_freqs."):
                x, y = _thin(s)
                label = f"side {side}" if name.endswith(".1") else None
                ax.plot(x, y, linestyle="none", marker="o" if side == "a" else "x",
                        color=STYLE[side]["color"], markersize=3, label=label)  # fmt: skip
                drawn = True
    ax.set_xlabel("step")
    ax.set_ylabel("logged key frequency")
    if not drawn:
        ax.text(0.5, 0.5, "no W_E and no logged key frequencies", ha="center",
                transform=ax.transAxes)  # fmt: skip


def pair_figure(pair: PairRun) -> Figure:
    """A pair: loss and accuracy of both sides, the divergence, the key frequencies."""
    fig = _figure(2, 2, (11, 7.5))
    ax = fig.axes
    _curves(ax[0], pair, ("train_loss", "test_loss"), "loss (log)", log=True)
    _curves(ax[1], pair, ("train_acc", "test_acc"), "accuracy", log=False)
    _divergence(ax[2], pair)
    _freq_panel(ax[3], pair)
    devices = " vs ".join(str(r.device) for r in pair.sides.values())
    differs = ", ".join(pair.differs) or devices
    cut = "; ".join(r.cut for r in pair.sides.values() if r.cut)
    verdict = pair.verdict + (f" ({cut})" if cut else "")
    fig.suptitle(clean(f"{pair.name}: seed {pair.seed}, a vs b: {differs} — {verdict}", 300),
                 fontsize=10)  # fmt: skip
    return fig


def save(fig: Figure, path: Path) -> None:
    """Write the figure; PlotError (one line) when it cannot be written."""
    check_output(path)
    try:
        fig.savefig(path, dpi=150)
    except OSError as exc:
        raise PlotError(f"cannot write {path}: {exc.strerror or exc}") from None
