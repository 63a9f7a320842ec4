"""The known-ops table: what is known per device, whether --deterministic fixes it, the source;
looked up by a traced op, quoted by the `maybe:` hints and listed in the docs."""

from __future__ import annotations

from pathlib import Path

from tuimon.engine.judge.hints import likely_causes
from tuimon.engine.judge.known_ops import (
    DEVICES,
    FIX_WORDS,
    KNOWN_OPS,
    embedding_entry,
    known_op,
    on_device,
)

DOCS = Path(__file__).resolve().parents[2] / "docs" / "explain-emb-check-spread-plot.md"
PYTORCH = ("https://github.com/pytorch/pytorch/", "https://docs.pytorch.org/docs/")


def test_every_entry_is_typed_and_has_a_public_source() -> None:
    for entry in KNOWN_OPS:
        assert entry.device in DEVICES and entry.fix in FIX_WORDS and entry.ops
        assert entry.sources and all(s.url.startswith(PYTORCH) for s in entry.sources)
        assert entry.line().count("https://") == len(entry.sources)
    assert {e.device for e in KNOWN_OPS} == set(DEVICES)


def test_a_traced_op_finds_its_entry_on_its_device_only() -> None:
    cpu = known_op("aten.index_put.default", ["cpu"], True)
    assert cpu is not None and cpu.fix == "fixed" and cpu.threads
    assert known_op("aten.index_put.default", ["cpu"], False) is None
    assert known_op("aten.mm.default", ["cpu"]) is None
    cuda = known_op("aten.index_add_.default", ["cuda:0"])
    assert cuda is not None and cuda.fix == "fixed"
    assert known_op("aten.index_add_.default", ["cpu"]) is None


def test_mps_says_what_is_known_and_what_is_not() -> None:
    entry = known_op("aten.index_add.default", ["mps:0"])
    assert entry is not None and entry is known_op("aten.index_put.default", ["mps"], True)
    assert entry.fix == "not fixed" and entry.unknown and "not measured here" in entry.unknown
    urls = [s.url for s in entry.sources]
    assert "https://github.com/pytorch/pytorch/issues/161029" in urls
    assert "13.8%" in entry.known
    line = entry.line()
    assert "--deterministic does not fix it; not known: " in line


def test_a_cpu_run_has_the_race_only_with_more_than_one_thread() -> None:
    assert embedding_entry("cpu", 1) is None and embedding_entry("cpu", None) is None
    assert embedding_entry("cpu", 2) is known_op("aten.index_put.default", ["cpu"], True)
    assert on_device("cuda:0") and all(e.device == "cuda" for e in on_device("cuda:0"))


def _pair(device: str, threads: int) -> dict[str, object]:
    env = {"device": device, "threads": threads, "deterministic": False}
    return {"summary": {"first_divergent_step": 2, "first_tensors": ["W_E"]},
            "runs": {"a": {"env": env}, "b": {"env": env}}, "env_diff": {}}  # fmt: skip


def test_the_maybe_hint_quotes_the_entry_of_the_pairs_device() -> None:
    (embedding,) = [h for h in likely_causes(_pair("cpu", 2)) if h.tag == "embedding"]
    assert "known: index_put with accumulate=True" in embedding.text()
    assert "--deterministic fixes it" in embedding.text()
    assert "https://github.com/pytorch/pytorch/issues/51366" in embedding.text()
    mps = [h.text() for h in likely_causes(_pair("mps", 1))]
    assert sum("--deterministic does not fix it" in h and "issues/161029" in h for h in mps) == 1
    one = [h for h in likely_causes(_pair("cpu", 1)) if h.tag == "embedding"]
    assert "known:" not in one[0].text()  # one CPU thread: the table has nothing to say


def test_the_docs_list_every_entry_and_source() -> None:
    page = DOCS.read_text()
    for entry in KNOWN_OPS:
        for source in entry.sources:
            assert source.url in page, source.url
