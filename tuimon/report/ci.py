"""What a CI job reads: JUnit XML (`--junit FILE`) and a Markdown summary (`--summary FILE`, or
GitHub's `$GITHUB_STEP_SUMMARY`), one test case per pair (or per seed and repeat of a sweep).

IDENTICAL and CLOSE pass; DIVERGED is a failure whose message names the step, the metric, both
values' absolute and relative difference and the tolerance (or band) they went past;
INCOMPLETE (a run failed, stopped early, or a pair never ran) is an error. Every name and value
comes from a run: in XML, characters XML 1.0 cannot hold are written as `\\xNN` escapes; in
Markdown, each is data, never markup.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tuimon.engine.judge.verdict import CLOSE, DIVERGED, IDENTICAL

PASSED = (IDENTICAL, CLOSE)


@dataclass
class Case:
    """One test case: a pair (or a sweep's job) and what it came to."""

    name: str
    verdict: str | None
    """None: the pair never ran, or ended before it was judged."""
    message: str
    """One line: why it failed or errs, or what it came to."""
    details: list[str] = field(default_factory=list)
    """More lines (the headline, where the pair is saved): the body of a failure."""
    seconds: float | None = None

    @property
    def outcome(self) -> str:
        """passed, failure (DIVERGED) or error (anything else)."""
        if self.verdict in PASSED:
            return "passed"
        return "failure" if self.verdict == DIVERGED else "error"


def _number(value: object, digits: int = 3) -> str:
    """A difference or a limit, short (`9e-05`); `digits` 0: a value in full (its repr)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return repr(value) if isinstance(value, int) or not digits else f"{value:.{digits}g}"


def limit_words(summary: Mapping[str, Any], beyond: Mapping[str, Any] | None = None) -> str:
    """What the values went past: `the tolerance 1e-05 (relative)`, `tolerance 0 (bitwise)`,
    or `the band abs 3e-06, rel 2e-06 (10 runs of sweep ID)`."""
    band = summary.get("band")
    if isinstance(band, Mapping) and beyond is not None and "band" in beyond:
        where = f"{band.get('runs')} runs of sweep {band.get('source')}"
        got = beyond.get("band")
        if not isinstance(got, Mapping):
            return f"no band for it ({where} never logged it), tolerance 0 (bitwise)"
        if got.get("abs") == 0 and got.get("rel") == 0:
            return f"the band: bitwise equal in all {where}"
        return f"the band abs {_number(got.get('abs'))}, rel {_number(got.get('rel'))} ({where})"
    tolerance = summary.get("tolerance")
    if isinstance(band, Mapping):
        where = f"{band.get('runs')} runs of sweep {band.get('source')}"
        found = band.get("metrics")
        metrics: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        wide = [
            m for m in metrics.values() if isinstance(m, Mapping) and (m.get("abs") or m.get("rel"))
        ]
        if not wide and not band.get("digests_differ"):  # the repeats were bitwise equal
            return f"the band: bitwise equal in all {where}"
        return f"the band of {len(metrics)} metrics ({where})"
    if not tolerance:
        return "the tolerance 0 (bitwise)"
    return f"the tolerance {_number(tolerance, 0)} (relative)"


def verdict_message(summary: Mapping[str, Any]) -> str:
    """One line on a summary (`Summary.to_dict`): for DIVERGED the step, the metric, both
    values, their absolute and relative difference and the tolerance or band."""
    verdict = summary.get("verdict")
    beyond = summary.get("beyond")
    if verdict == DIVERGED and isinstance(beyond, Mapping):
        step = beyond.get("step")
        limit = limit_words(summary, beyond)
        if beyond.get("metric") is None:
            tensors = beyond.get("tensors") or summary.get("first_tensors") or []
            which = f" (tensors: {', '.join(map(str, tensors))})" if tensors else ""
            return f"DIVERGED at step {step}: parameter digests differ{which}; beyond {limit}"
        return (
            f"DIVERGED at step {step}: {beyond['metric']} a {_number(beyond.get('a'), 0)} "
            f"b {_number(beyond.get('b'), 0)}, abs diff {_number(beyond.get('abs'))}, "
            f"rel diff {_number(beyond.get('rel'))}, beyond {limit}"
        )
    if verdict == DIVERGED:  # a text line or a line of bytes no reader judged as a step
        first = (summary.get("bytes") or {}).get("first")
        if isinstance(first, Mapping):
            return (
                f"DIVERGED at line {first.get('line_a')} of a, line {first.get('line_b')} of b: "
                f"{first.get('what')}; beyond {limit_words(summary)}"
            )
        metrics = ", ".join(map(str, summary.get("first_divergent_metrics") or [])) or "?"
        return (
            f"DIVERGED at step {summary.get('first_divergent_step')}: {metrics}; "
            f"beyond {limit_words(summary)}"
        )
    compared = summary.get("steps_compared")
    if verdict in PASSED:
        most = summary.get("max_divergence")
        how = "bitwise equal" if verdict == IDENTICAL else f"max rel diff {_number(most)}"
        return f"{verdict}: {compared} steps compared, {how}, within {limit_words(summary)}"
    return f"{verdict}: {summary.get('reason') or 'the pair did not finish'}"


def case_of(
    name: str, summary: Mapping[str, Any] | None, details: Sequence[str] = (), **more: Any
) -> Case:
    """The test case of a pair's summary (None: it never ran or was never judged)."""
    why = more.pop("why", "the pair never ran")
    if summary is None:
        return Case(name, None, f"not judged: {why}", list(details), **more)
    verdict = summary.get("verdict")
    return Case(name, verdict if isinstance(verdict, str) else None,
                verdict_message(summary), list(details), **more)  # fmt: skip


# --- JUnit XML ------------------------------------------------------------------------------

_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
"""Characters XML 1.0 cannot hold (C0 controls, lone surrogates, U+FFFE/U+FFFF)."""


def xml_text(text: object) -> str:
    """`text` as XML 1.0 can hold it: each character it cannot, as a visible `\\xNN` /
    `\\uNNNN` escape (the markup characters are escaped by the writer)."""
    return _NOT_XML.sub(lambda m: ascii(m[0])[1:-1], str(text))


def junit_xml(suite: str, cases: Sequence[Case]) -> bytes:
    """One `<testsuites>` holding one `<testsuite>`: a `<testcase>` per case, with a
    `<failure>` (DIVERGED) or an `<error>` (INCOMPLETE, never ran), UTF-8."""
    failures = sum(c.outcome == "failure" for c in cases)
    errors = sum(c.outcome == "error" for c in cases)
    seconds = sum(c.seconds or 0.0 for c in cases)
    counts = {"tests": str(len(cases)), "failures": str(failures), "errors": str(errors)}
    root = ET.Element("testsuites", {"name": "tuimon", **counts, "time": _time(seconds)})
    attrs = {"name": xml_text(suite), **counts, "skipped": "0", "time": _time(seconds)}
    node = ET.SubElement(root, "testsuite", attrs)
    for case in cases:
        attrs = {"classname": xml_text(suite), "name": xml_text(case.name)}
        attrs["time"] = _time(case.seconds or 0.0)
        element = ET.SubElement(node, "testcase", attrs)
        body = "\n".join([case.message, *case.details])
        if case.outcome != "passed":
            kind = case.verdict or "NOT JUDGED"
            sub = ET.SubElement(
                element, case.outcome, {"message": xml_text(case.message), "type": kind}
            )
            sub.text = xml_text(body)
        else:
            ET.SubElement(element, "system-out").text = xml_text(body)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


def _time(seconds: float) -> str:
    return f"{seconds:.3f}" if math.isfinite(seconds) and seconds >= 0 else "0"


# --- Markdown -------------------------------------------------------------------------------

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]|~])")
_MARKS = {IDENTICAL: "✅", CLOSE: "✅", DIVERGED: "❌"}


def md_text(text: object) -> str:
    """Text from a run as Markdown shows it, never as markup: HTML's characters as entities,
    Markdown's punctuation escaped, control characters as escapes, one line."""
    plain = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in str(text).replace("\n", " "))
    plain = plain.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", plain)


def markdown(title: str, cases: Sequence[Case]) -> str:
    """The summary: a heading with the counts, a table of the cases (verdict and message),
    then each failure's and error's details."""
    passed = sum(c.outcome == "passed" for c in cases)
    failed = sum(c.outcome == "failure" for c in cases)
    errors = len(cases) - passed - failed
    lines = [
        f"### {md_text(title)}",
        "",
        f"{passed} passed, {failed} failed (DIVERGED), {errors} errors (INCOMPLETE or not run)"
        f" of {len(cases)}",
        "",
        "| | case | verdict | what |",
        "|---|---|---|---|",
    ]
    for case in cases:
        mark = _MARKS.get(case.verdict or "", "⚠️")
        verdict = md_text(case.verdict or "not judged")
        lines.append(f"| {mark} | {md_text(case.name)} | {verdict} | {md_text(case.message)} |")
    for case in cases:
        if case.outcome != "passed" and case.details:
            lines += ["", f"**{md_text(case.name)}**", ""]
            lines += [f"- {md_text(line.strip())}" for line in case.details]
    return "\n".join(lines) + "\n"
