"""A headless replay flat out is judged in blocks by compare's judge (`judge_pair`), never
record by record: the same report as the paced, record-by-record replay, byte for byte, the
verdict compare gives, and no record per step made or held."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from demo_pairs import write_demo

from tuimon.cli import main
from tuimon.engine.sources.saved_pair import SavedPair

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ["cpu-cpu-threads2-contiguous", "cpu-cpu-b-killed", "cpu-cpu-threads1"]


def _plain(folder: Path, steps: int, part: int) -> list[str]:
    """Two plain JSON Lines logs (no header), side b parting at `part`."""
    paths = []
    for side in "ab":
        rows = [
            {
                "step": s,
                "t": 0.1 * s,
                "loss": 1.0 / (s + 1) * (1 + 1e-9 * (side == "b" and s >= part)),
            }
            for s in range(steps)
        ]
        path = folder / f"{side}.jsonl"
        path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
        paths.append(str(path))
    return paths


def _both(capsys: pytest.CaptureFixture[str], args: list[str]) -> tuple[str, str]:
    """The report of a replay flat out (headless into a pipe) and of the paced one."""
    code = main(["replay", *args, "--headless"])
    fast = capsys.readouterr().out + f"exit {code}"
    code = main(["replay", *args, "--headless", "--speed", "1e12"])
    paced = capsys.readouterr().out + f"exit {code}"
    return fast, paced


@pytest.mark.parametrize("name", SAMPLES)
@pytest.mark.parametrize("as_json", [True, False])
def test_flat_out_replay_says_what_the_record_by_record_replay_says(capsys, name, as_json):
    args = [str(ROOT / "sample_logs" / name), *(["--json"] if as_json else [])]
    fast, paced = _both(capsys, args)
    assert fast == paced


def test_flat_out_replay_of_two_logs_with_text_and_a_divergence(capsys, tmp_path):
    a, b = write_demo(tmp_path, steps=300, diverge=40, extra={"a": [(7, "hello")]})
    fast, paced = _both(capsys, [str(a), str(b), "--json"])
    assert fast == paced
    (tmp_path / "plain").mkdir()
    plain = _plain(tmp_path / "plain", 2000, 1500)
    fast, paced = _both(capsys, [*plain, "--json"])
    assert fast == paced
    assert json.loads(fast.splitlines()[0])["first_divergent_step"] == 1500


def test_flat_out_replay_gives_compares_verdict_and_reads_no_record(capsys, tmp_path, monkeypatch):
    paths = _plain(tmp_path, 3000, 2000)

    def no_records(self: SavedPair, side: str) -> list[object]:
        raise AssertionError("a flat-out replay read every record")

    monkeypatch.setattr(SavedPair, "records", no_records)
    assert main(["replay", *paths, "--headless", "--json"]) == 1
    replayed = json.loads(capsys.readouterr().out)
    assert main(["compare", *paths, "--json"]) == 1
    compared = json.loads(capsys.readouterr().out)
    # what a replay's report adds (the session's status, hints) or leaves to compare (the
    # line of each log where they part, the byte rule's account) aside, the summaries are one
    for key in ("pair", "saved", "status", "hints", "first_divergent_lines", "bytes", "precision"):
        replayed.pop(key, None)
        compared.pop(key, None)
    assert replayed == compared
    assert replayed["first_divergent_step"] == 2000


def test_a_paced_replay_reads_its_logs_a_block_at_a_time(tmp_path, monkeypatch):
    """The view's replay (`stream`): the same report as the replay that reads both logs whole
    first, without reading them whole (their first rows shown once a block is read)."""
    import io

    from tuimon.engine.sources.replay import replay_session
    from tuimon.engine.sources.saved_pair import resolve_logs
    from tuimon.report.headless import run_headless

    paths = _plain(tmp_path, 30_000, 20_000)  # > 1 MiB a log: read in blocks

    def report(stream: bool) -> str:
        logs = resolve_logs(paths)
        out = io.StringIO()

        def make(on_batch):  # type: ignore[no-untyped-def]
            return replay_session(logs, speed=1e12, on_batch=on_batch, stream=stream)

        code = run_headless([make], as_json=True, out=out)
        return out.getvalue() + f"exit {code}"

    whole = report(False)

    def no_records(self: SavedPair, side: str) -> list[object]:
        raise AssertionError("a streamed replay read a log whole")

    monkeypatch.setattr(SavedPair, "records", no_records)
    assert report(True) == whole
    assert json.loads(whole.splitlines()[0])["first_divergent_step"] == 20_000


def test_the_view_says_the_verdict_judged_in_full_while_it_replays(tmp_path, monkeypatch):
    """The view's replay judges the pair in full beside its paced feed (compare's judge, in a
    thread): the verdict and the first divergence are said long before the feed gets there,
    and a jump to the first divergence takes the step from it."""
    import asyncio

    import tuimon.engine.sources.replay as replay
    from tuimon.engine.analyses.compare import judge_pair
    from tuimon.engine.sources.saved_pair import resolve_logs

    monkeypatch.setattr(replay, "AHEAD_AFTER", 0.0)
    paths = _plain(tmp_path, 30_000, 20_000)
    said: list[str] = []

    def on_batch(batch):  # type: ignore[no-untyped-def]
        said.append(batch.message or "")
        if session.judged_ahead is not None:
            session.stop()

    session = replay.replay_session(
        resolve_logs(paths), speed=50, on_batch=on_batch, stream=True, judge=judge_pair
    )
    asyncio.run(asyncio.wait_for(session.run(), 60))
    assert session.judged_ahead is not None
    assert session.judged_ahead.first_divergent_step == 20_000
    assert any(m.startswith("judged in full: DIVERGED, first divergent step 20000") for m in said)
    assert session.sides["a"].records < 20_000  # the feed was nowhere near it


def test_a_streamed_replay_jumps_to_a_step_past_the_blocks_read(tmp_path):
    """A jump (the first divergence) fast-forwards a streamed replay through blocks not read
    yet: the steps it passes are fed in chunks and it paces again from that step."""
    import asyncio

    from tuimon.engine.sources.replay import replay_session
    from tuimon.engine.sources.saved_pair import resolve_logs

    paths = _plain(tmp_path, 30_000, 20_000)
    reached: list[int] = []

    def on_batch(batch):  # type: ignore[no-untyped-def]
        step = batch.sides["a"].step
        reached.append(step if step is not None else -1)
        if step is not None and step >= 20_000:
            session.stop()

    session = replay_session(resolve_logs(paths), speed=50, on_batch=on_batch, stream=True)
    assert session.controls is not None
    session.controls.jump(20_000)
    asyncio.run(asyncio.wait_for(session.run(), 60))
    assert max(reached) >= 20_000
    assert session.sides["a"].records >= 20_000  # every step before it was fed on the way
