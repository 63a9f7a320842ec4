"""The README is a front page and docs/ the guide (issue 29, item 7): the README's length and its
two set-up commands, the site's pages all in mkdocs.yml, links between them, and every pointer
of the code to the documentation naming a page and a heading that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"

# The two set-up commands: one installs and runs the main job, one installs and passes the tests.
MAIN_JOB = (
    'python3 -m venv .venv && . .venv/bin/activate && pip install -e . "torch==2.13.0" '
    "&& python -m compileall -q tuimon && tuimon pair --seed 0 --devices cpu,cpu"
)
TESTS_JOB = (
    'python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[test]" "torch==2.13.0" '
    "&& python -m compileall -q tuimon && python -m pytest"
)


def headings(page: Path) -> set[str]:
    """The headings of a Markdown page, outside its code blocks."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {h.strip() for h in re.findall(r"^#+ (.+)$", text, re.M)}


def anchors(page: Path) -> set[str]:
    """The ids mkdocs gives those headings (Python-Markdown's toc slugify)."""
    out = set()
    for h in headings(page):
        slug = re.sub(r"[^\w\s-]", "", h.replace("`", "")).strip().lower()
        out.add(re.sub(r"[-\s]+", "-", slug))
    return out


def test_the_readme_is_a_front_page() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 300
    assert MAIN_JOB in text and TESTS_JOB in text
    # a CPU quick start comes before anything that needs a Mac or a GPU
    cpu = text.index("tuimon pair --seed 0 --devices cpu,cpu --headless")
    assert cpu < text.index("--devices mps") and cpu < text.index("--devices cuda")
    assert "](pair.svg)" in text and (ROOT / "pair.svg").is_file()


def test_the_set_up_commands_are_the_ones_ci_runs() -> None:
    """`.ci/run` installs what the README's test command installs, and runs pytest."""
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'pip install --quiet -e ".[test]" "torch==2.13.0"' in ci
    assert "python -m compileall -q tuimon" in ci  # bytecode, as the README's command writes it
    assert "python -m pytest" in ci
    assert "mkdocs build --strict" in ci
    assert (DOCS / "getting-started.md").read_text().count(MAIN_JOB) == 1
    assert (DOCS / "getting-started.md").read_text().count(TESTS_JOB) == 1


def test_every_page_is_in_the_site_and_every_entry_is_a_page() -> None:
    config = (ROOT / "mkdocs.yml").read_text()
    listed = re.findall(r":\s*([\w-]+\.md)\s*$", config, re.M)
    pages = sorted(p.name for p in DOCS.glob("*.md"))
    assert sorted(listed) == pages
    assert "name: material" in config


@pytest.mark.parametrize("page", [README, *sorted(DOCS.glob("*.md"))], ids=lambda p: p.name)
def test_links_lead_to_pages_and_headings_that_exist(page: Path) -> None:
    """Relative links of the README and of the pages (mkdocs --strict checks the pages too;
    this also runs where mkdocs is not installed)."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"\w+://", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        assert dest.exists(), f"{page.name}: {target}"
        if anchor:
            assert anchor in anchors(dest), f"{page.name}: {target}: no such heading"


def code_pointers() -> list[tuple[str, str, str]]:
    """(where, page, heading or '') for each pointer to the docs in the package and
    pyproject.toml: `docs/PAGE.md` optionally followed by `, 'Heading'` or ` "Heading"`."""
    out = []
    files = [*sorted((ROOT / "tuimon").rglob("*.py")), ROOT / "pyproject.toml"]
    for file in files:
        text = re.sub(r'"\s*\n\s*"', "", file.read_text())  # implicit string concatenation
        text = re.sub(r"\n\s*#\s*", " ", text)  # a comment's lines joined
        where = str(file.relative_to(ROOT))
        for m in re.finditer(r"docs/([\w-]+\.md)(?:,? ['\"]([^'\"]+)['\"])?", text):
            out.append((where, m[1], m[2] or ""))
    return out


def test_the_code_points_at_pages_and_headings_that_exist() -> None:
    pointers = code_pointers()
    assert len(pointers) >= 5
    for where, page, heading in pointers:
        assert (DOCS / page).is_file(), f"{where}: docs/{page} does not exist"
        if heading:
            assert heading in headings(DOCS / page), f"{where}: no heading {heading!r} in {page}"


def test_the_code_names_no_readme_section() -> None:
    """The guide left the README: a `README "X"`, `README, 'X'` or `README: X` in the package
    (or pyproject.toml) must name a heading the README still has."""
    readme = headings(README)
    for file in [*sorted((ROOT / "tuimon").rglob("*.py")), ROOT / "pyproject.toml"]:
        text = re.sub(r'"\s*\n\s*"', "", file.read_text())
        for m in re.finditer(r"README(?:,|:)? ?['\"]?([A-Z`][^'\")\n]*)", text):
            assert m[1].strip() in readme, f"{file.relative_to(ROOT)}: README {m[1]!r}"


def test_the_docs_say_the_verdict_rule_word_for_word() -> None:
    """`PRECEDENCE` (the rule `verdict` applies, in words) is what the verdicts page says."""
    from tuimon.engine.judge.verdict import PRECEDENCE

    page = " ".join((DOCS / "verdicts-and-divergence.md").read_text().split())
    assert PRECEDENCE in page
