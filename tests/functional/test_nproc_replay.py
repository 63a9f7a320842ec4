"""A saved pair of `--nproc` sides replayed: the replica check runs again from the saved rank
files, headless (text and --json) and in the pair view."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import wait_for

from tuimon.cli import main
from tuimon.engine.sources.replay import replay_session
from tuimon.engine.sources.saved_pair import resolve_logs
from tuimon.ui.app import TuimonApp
from tuimon.ui.pair_screen import PairScreen

PARTED = "side a: rank 1 parted from rank 0 at step 5 (W)"


def _log(parted_at: int | None = None) -> str:
    lines: list[dict[str, object]] = [
        {"type": "header", "format": "tuimon.steplog/1", "run": {}, "hyper": {}, "env": {}}
    ]
    for k in range(10):
        d = f"d{k}" if parted_at is None or k < parted_at else f"x{k}"
        lines.append({"type": "step", "step": k, "loss": 1 / (k + 1), "param_digest": d,
                      "param_digests": {"W": d, "b": f"b{k}"}})  # fmt: skip
    lines.append({"type": "end", "status": "ok", "steps": 10})
    return "".join(json.dumps(x) + "\n" for x in lines)


def saved_pair(tmp_path: Path) -> Path:
    """A pair of a 2-rank side a (rank 1 parts at step 5) and a 1-rank side b."""
    pair = tmp_path / "pair"
    pair.mkdir()
    (pair / "a.jsonl").write_text(_log())
    (pair / "b.jsonl").write_text(_log())
    (pair / "a.rank1.jsonl").write_text(_log(parted_at=5))
    parted = {"rank": 1, "step": 5, "tensors": ["W"]}
    replicas = {"a": {"ranks": 2, "compared": 10, "parted": parted}}  # as the live pair saved it
    doc = {"format": "tuimon.pair/1", "nproc": [2, 1], "devices": ["cpu", "cpu"],
           "status": "finished", "replicas": replicas}  # fmt: skip
    (pair / "pair.json").write_text(json.dumps(doc))
    return pair


def test_a_headless_replay_checks_the_replicas_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pair = saved_pair(tmp_path)
    main(["replay", str(pair), "--headless", "--speed", "100000"])
    assert PARTED in capsys.readouterr().out
    main(["replay", str(pair), "--headless", "--json", "--speed", "100000"])
    replicas = json.loads(capsys.readouterr().out)["replicas"]
    assert replicas["a"]["parted"] == {"rank": 1, "step": 5, "tensors": ["W"]}
    assert replicas["a"]["compared"] == 10 and "b" not in replicas


def test_a_parted_replica_is_diverged_in_replay_compare_and_the_browser(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The sides agree, a replica of side a parted: DIVERGED (exit 1) naming the rank and the
    step, the same in a replay (the rank files checked again), compare (pair.json's
    `replicas`), the browser's judgement and a saved pair's summary."""
    from tuimon.engine.sources.saved_pair import SavedPair
    from tuimon.ui.saved_view_model import judge_saved

    pair = saved_pair(tmp_path)
    headline = f"DIVERGED: {PARTED}; between the sides: 10 steps bitwise equal"
    assert main(["replay", str(pair), "--headless", "--speed", "100000"]) == 1
    assert capsys.readouterr().out.startswith(headline)
    assert main(["compare", str(pair)]) == 1
    assert capsys.readouterr().out.startswith(headline)
    assert main(["compare", str(pair), "--json"]) == 1
    parted = [{"side": "a", "rank": 1, "step": 5, "tensors": ["W"]}]
    assert json.loads(capsys.readouterr().out)["replicas_parted"] == parted
    logs = SavedPair.of(resolve_logs([str(pair)]))
    assert judge_saved(logs).summary.replicas_parted == parted
    assert logs.summary().verdict == "DIVERGED"


def test_a_replay_missing_a_rank_file_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pair = saved_pair(tmp_path)
    (pair / "a.rank1.jsonl").unlink()
    main(["replay", str(pair), "--headless", "--speed", "100000"])
    out = capsys.readouterr().out
    assert "side a: replicas" in out and "a.rank1.jsonl: no such file" in out


async def test_the_pair_view_of_a_replay_names_the_parted_rank(tmp_path: Path) -> None:
    logs = resolve_logs([str(saved_pair(tmp_path))])
    app = TuimonApp(
        store=tmp_path / "store",
        make_session=lambda on_batch: replay_session(logs, speed=1e6, on_batch=on_batch),
        replay=True,
    )
    async with app.run_test(size=(150, 40)) as pilot:
        screen = next(s for s in app.screen_stack if isinstance(s, PairScreen))
        await wait_for(pilot, lambda: screen.model.done)
        await wait_for(pilot, lambda: PARTED in (screen.model.message or ""))  # checked again
        await pilot.press("q")
    assert PARTED in app.summary_lines  # pair.json's


SAMPLES = Path(__file__).resolve().parents[2] / "sample_logs"


def test_the_rank_samples_compare_and_replay_as_saved(capsys: pytest.CaptureFixture[str]) -> None:
    """sample_logs/cpu-cpu-ranks-*: 1 rank against 2 parts (test loss at step 0, every tensor
    from step 2), 2 against 2 is IDENTICAL with every replica equal to its rank 0."""
    assert main(["compare", str(SAMPLES / "cpu-cpu-ranks-1-vs-2"), "--json"]) == 1
    summary = json.loads(capsys.readouterr().out)
    assert summary["first_divergent_step"] == 0 and summary["first_digest_step"] == 2
    pair = SAMPLES / "cpu-cpu-ranks-2-vs-2"
    assert main(["replay", str(pair), "--headless", "--json", "--speed", "100000"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "IDENTICAL"
    assert {s: r["compared"] for s, r in out["replicas"].items()} == {"a": 100, "b": 100}
    assert all(r["parted"] is None for r in out["replicas"].values())


def test_compare_of_a_saved_ranked_pair_says_its_replicas(capsys) -> None:
    import json

    from tuimon.cli import main

    pair = Path(__file__).resolve().parents[2] / "sample_logs" / "cpu-cpu-ranks-1-vs-2"
    assert main(["compare", str(pair)]) == 1
    assert "side b: 2 ranks, replicas equal to rank 0" in capsys.readouterr().out
    assert main(["compare", "--json", str(pair)]) == 1
    assert "b" in json.loads(capsys.readouterr().out)["replicas"]
