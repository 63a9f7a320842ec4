"""The registry of formats is the one list: the docs' table says what it holds, every format
`load` gives is in it, and `tuimon read` explains each by its rule."""

from __future__ import annotations

import json
from pathlib import Path

from tuimon.cli import main
from tuimon.readers import FORMATS, load
from tuimon.readers.formats import BY_NAME

DOCS = Path(__file__).resolve().parents[2] / "docs" / "reading-logs.md"


def _docs_table() -> dict[str, list[str]]:
    rows = {}
    for line in DOCS.read_text().splitlines():
        cells = [c.strip() for c in line.replace("\\|", "\x00").strip("|").split("|")]
        if len(cells) == 4 and cells[0] not in ("format", "---"):
            rows[cells[0]] = [c.replace("\x00", "|") for c in cells[1:]]
    return rows


def test_the_docs_list_every_format_of_the_registry_as_it_is() -> None:
    table = _docs_table()
    assert list(table) == [f.name for f in FORMATS]
    for entry in FORMATS:
        recognised, writers, streams = table[entry.name]
        assert (recognised, writers) == (entry.recognised, entry.writers)
        assert streams.startswith("yes") == (entry.streams or entry.records)


def test_every_format_load_gives_is_in_the_registry(tmp_path: Path, capsys) -> None:
    samples = {
        "a.jsonl": '{"step": 1, "loss": 0.5}\n{"step": 2, "loss": 0.4}\n',
        "b.csv": "step,loss\n1,0.5\n2,0.4\n",
        "c.txt": "epoch  loss  acc\n1  0.5  0.1\n2  0.4  0.2\n",
        "d.log": "step 1: loss 0.5\nstep 2: loss 0.4\n",
        "e.json": json.dumps({"log_history": [{"step": 1, "loss": 0.5}]}),
        "f.json": json.dumps({"loss": {"steps": [1, 2], "values": [0.5, 0.4]}}),
        "g.json": json.dumps({"steps": [1, 2], "loss": [0.5, 0.4]}),
    }
    for name, text in samples.items():
        (tmp_path / name).write_text(text)
        loaded = load(tmp_path / name)
        assert loaded.format in BY_NAME and loaded.steps, name
        assert main(["read", str(tmp_path / name), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["why"] == BY_NAME[loaded.format].recognised
