"""The CI reports' text (tuimon.report.ci): names from runs are data in XML and Markdown."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import junitparser

from tuimon.engine.judge.align import compare_steps
from tuimon.report.ci import case_of, junit_xml, markdown
from tuimon.steplog import Step

HOSTILE = 'loss\x00\x1b[31m<&">\ud800\ufffe]]>|`*_'
"""A metric name with NUL, an escape sequence, markup, a lone surrogate, U+FFFE, a CDATA end
and Markdown's punctuation."""


def diverged() -> dict:
    a = [Step(s, {HOSTILE: 1.0 + s}) for s in range(3)]
    b = [Step(s, {HOSTILE: 1.0 + s + (0.5 if s == 2 else 0.0)}) for s in range(3)]
    return compare_steps(a, b, 0.01)[1].summary().to_dict()


def test_junit_of_a_hostile_metric_name_is_valid_xml_naming_step_and_tolerance(tmp_path) -> None:
    summary = diverged()
    assert summary["beyond"]["step"] == 2 and summary["beyond"]["metric"] == HOSTILE
    data = junit_xml("suite <x>", [case_of(f"case {HOSTILE}", summary, ["detail \x07"])])
    ET.fromstring(data)  # well-formed XML 1.0
    path = tmp_path / "j.xml"
    path.write_bytes(data)
    (suite,) = junitparser.JUnitXml.fromfile(str(path))
    (case,) = suite
    (failure,) = case.result
    assert suite.failures == 1 and suite.errors == 0
    assert failure.message.startswith('DIVERGED at step 2: loss\\x00\\x1b[31m<&">\\ud800')
    said = "a 3.0 b 3.5, abs diff 0.5, rel diff 0.143, beyond the tolerance 0.01 (relative)"
    assert said in failure.message
    assert "\\x07" in failure.text


def test_markdown_shows_names_as_data() -> None:
    text = markdown("tuimon pair", [case_of(HOSTILE, diverged())])
    assert "\x1b" not in text and "\x00" not in text and "<" not in text.split("\n", 1)[1]
    # escapes shown as typed (their backslash escaped), markup as entities, | escaped
    assert 'loss\\\\x00\\\\x1b\\[31m&lt;&amp;"&gt;\\\\ud800' in text
    assert text.count("|") - text.count("\\|") == 5 * 3  # header, rule and one row of 4 cells
    assert "0 passed, 1 failed (DIVERGED), 0 errors" in text


def test_passing_and_unjudged_cases() -> None:
    a = [Step(s, {"loss": 1.0}) for s in range(2)]
    same = compare_steps(a, a)[1].summary().to_dict()
    data = junit_xml("s", [case_of("ok", same), case_of("gone", None, why="never ran")])
    root = ET.fromstring(data)
    suite = root.find("testsuite")
    assert suite is not None and suite.get("tests") == "2" and suite.get("errors") == "1"
    ok, gone = suite.findall("testcase")
    assert ok.find("failure") is None and ok.find("error") is None
    assert "IDENTICAL: 2 steps compared, bitwise equal" in (ok.findtext("system-out") or "")
    error = gone.find("error")
    assert error is not None and error.get("message") == "not judged: never ran"
