"""Likely-cause hints on pairs whose fingerprints hold a known cause."""

from __future__ import annotations

import copy
import json
import sys
from typing import Any

from helpers import FAKE_TRAINER

from tuimon.cli import main
from tuimon.engine.judge.fingerprints import env_diff
from tuimon.engine.judge.hints import likely_causes

FAKE = FAKE_TRAINER
ENV: dict[str, Any] = {
    "device": "cpu",
    "torch": "2.13.0",
    "threads": 1,
    "deterministic": False,
    "loss_dtype": "float64",
    "host": "lab-box",
}


def pair_doc(a: dict[str, Any], b: dict[str, Any], *, first=2, tensors=("W_U",)) -> dict:
    """A pair.json document with these two fingerprints (first divergence at step `first`)."""
    return {
        "devices": [a["device"], b["device"]],
        "runs": {"a": {"env": a}, "b": {"env": b}},
        "env_diff": env_diff(a, b),
        "summary": {"first_divergent_step": first, "first_tensors": list(tensors)},
    }


def variant(**changes: Any) -> dict[str, Any]:
    return {**copy.deepcopy(ENV), **changes}


def tags(doc: dict) -> list[str]:
    return [h.tag for h in likely_causes(doc)]


def test_nothing_to_explain_when_nothing_differed():
    doc = pair_doc(variant(threads=4), variant(threads=4, device="mps"), first=None)
    assert likely_causes(doc) == []


def test_no_hint_for_a_clean_fingerprint():
    assert likely_causes(pair_doc(variant(), variant())) == []


def test_threads_without_deterministic_algorithms():
    (hint,) = likely_causes(pair_doc(variant(threads=2), variant(threads=2)))
    assert hint.tag == "threads"
    assert "run a: cpu, 2 threads" in hint.evidence and "run b" in hint.evidence
    assert hint.text().startswith("maybe: ")
    assert tags(pair_doc(variant(threads=2, deterministic=True), variant())) == []


def test_different_versions():
    (hint,) = likely_causes(
        pair_doc(variant(device="cuda:0", cuda="12.4"), variant(device="cuda:0", cuda="13.0"))
    )
    assert hint.tag == "versions" and "cuda 12.4 vs 13.0" in hint.evidence
    doc = pair_doc(variant(), variant(torch="2.11.0"))
    assert tags(doc) == ["versions"] and "torch 2.13.0 vs 2.11.0" in likely_causes(doc)[0].evidence


def test_different_loss_dtype_and_mps():
    doc = pair_doc(variant(), variant(device="mps", loss_dtype="float32"))
    assert tags(doc) == ["loss dtype", "mps"]
    dtype, mps = likely_causes(doc)
    assert dtype.evidence == "loss_dtype float64 vs float32"
    assert "run b on mps" in mps.evidence


def test_embedding_first():
    doc = pair_doc(variant(), variant(), first=2, tensors=("W_E",))
    (hint,) = likely_causes(doc)
    assert hint.tag == "embedding" and "step 2: W_E" in hint.evidence


ELEVEN = ("W_E", "W_pos", "W_K", "W_Q", "W_V", "W_O", "W_in", "b_in", "W_out", "b_out", "W_U")


def test_embedding_only_when_it_parted_before_the_others():
    """cuda against cpu: every tensor parts at once, so none parted first (issue 41)."""
    doc = pair_doc(variant(), variant(), first=0, tensors=ELEVEN)
    doc["summary"].update(first_tensor_step=2, first_tensors_among=11)
    assert "embedding" not in tags(doc)
    doc["summary"].update(first_tensors=["W_E"])
    (hint,) = likely_causes(doc)
    assert hint.tag == "embedding"
    assert hint.evidence == "first divergent tensor(s) at step 2: W_E (1 of 11 tensors)"
    doc["summary"].update(first_tensors=["W_E", "W_pos"], first_tensors_among=2)
    assert "embedding" not in tags(doc)  # both of the two: none before the other


def test_the_headline_says_when_every_tensor_parted_at_once(capsys) -> None:
    """sample_logs/cuda-cpu: all 11 tensors part at step 0; the headline names no first."""
    from helpers import TESTS

    assert main(["compare", str(TESTS.parent / "sample_logs" / "cuda-cpu")]) == 1
    headline = capsys.readouterr().out.splitlines()[0]
    assert "all 11 tensors parted at once" in headline and "parted first" not in headline


def test_embedding_in_a_pair_json_without_the_count():
    """An older pair.json has no count: one tensor alone parted first, several say nothing."""
    assert tags(pair_doc(variant(), variant(), tensors=("W_E",))) == ["embedding"]
    assert tags(pair_doc(variant(), variant(), tensors=ELEVEN)) == []


def test_a_hint_on_one_line_leads_with_what_to_try():
    (hint,) = likely_causes(pair_doc(variant(threads=2), variant()))
    assert hint.line() == (
        "try --threads 1 or --deterministic: maybe more than one CPU thread without "
        "deterministic algorithms (racy backward kernels)"
    )
    assert "(racy backward kernels; try --threads 1 or --deterministic)" in hint.text()
    (host,) = likely_causes(pair_doc(variant(), variant(host="other")))
    assert host.line() == "maybe: different hosts (hardware, libraries)"


def test_different_hosts_and_evidence_is_sanitised():
    doc = pair_doc(variant(), variant(host="mac-mini\x1b[31m"))
    (hint,) = likely_causes(doc)
    assert hint.tag == "hosts" and "\x1b" not in hint.evidence and "mac-mini" in hint.evidence


def test_hints_are_stored_and_printed(tmp_path, capsys):
    store = tmp_path / "store"
    fake = [sys.executable, FAKE, "--side", "{side}", "--steps", "5", "--diverge-at", "2"]
    argv = ["pair", "--headless", "--store", str(store), "--threads", "2", "--", *fake]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "maybe: the embedding's gradient" in out and "maybe: more than one CPU thread" in out
    (pair_dir,) = store.iterdir()
    meta = json.loads((pair_dir / "pair.json").read_text())
    assert [h["tag"] for h in meta["hints"]] == ["threads", "embedding"]


def test_env_rows_mark_exactly_the_keys_env_diff_names() -> None:
    """The view's table and pair.json's env_diff are one computation."""
    from tuimon.engine.judge.fingerprints import env_rows

    a = {"device": "cpu", "threads": 2, "env": {"X": "1"}, "same": 1}
    b = {"device": "mps", "threads": 2, "env": {"X": "2", "Y": "3"}, "same": 1}
    rows = env_rows(a, b)
    assert {k for k, _, _, differs in rows if differs} == set(env_diff(a, b))
    assert [r[0] for r in rows[:3]] == ["device", "env.X", "env.Y"]
