"""The documentation says what is true of the committed build, not how it got there: no issue numbers, no
"before the cut", no "is now", no sessions. A page may keep a past result worth reading in one section at its
end, `## History`, whose entries each start with a date (and name the commit)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "benchmarks/README.md"]
HISTORY = "## History"
# a lab diary's words: issue numbers mean nothing to a reader, and "now" / "the cut" need a "before" the page no
# longer tells
DIARY = re.compile(r"\bissues? \d+|\bthe cut\b|\bthis session\b|\btoday\b|\bnow\b", re.I)
DATED = re.compile(r"- \d{4}-\d{2}-\d{2}\b")


def diary_lines(text: str) -> list[str]:
    """'line: text' of every line outside the History section that speaks as a diary."""
    found, in_history = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("## "):
            in_history = line.strip() == HISTORY
        if not in_history and DIARY.search(line):
            found.append(f"{number}: {line.strip()}")
    return found


def history_faults(text: str) -> list[str]:
    """A History section must be the page's last, and each of its entries must start with a date."""
    if HISTORY not in text.splitlines():
        return []
    section = text.split(f"\n{HISTORY}\n", 1)[1]
    faults = [f"a section after {HISTORY}: {line}" for line in section.splitlines() if line.startswith("## ")]
    entries = [line for line in section.splitlines() if line.startswith("- ")]
    faults += [f"an undated entry: {line}" for line in entries if not DATED.match(line)]
    return faults + ([f"{HISTORY} without entries"] if not entries else [])


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_diary(page):
    text = page.read_text(encoding="utf-8")
    assert not diary_lines(text), f"{page.relative_to(ROOT)} speaks as a diary (say what is true, date the past " \
                                  f"in {HISTORY}):\n" + "\n".join(diary_lines(text))
    assert not history_faults(text), f"{page.relative_to(ROOT)}: " + "; ".join(history_faults(text))


@pytest.mark.parametrize("line", ["Until issue 43 the test queries were SQuAD-like.",
                                  "phase 2 at 50 steps (100 before the cut)",
                                  "the encoder now runs in fp16",
                                  "This session measured it."])
def test_diary_is_found(line):
    assert diary_lines(f"# Page\n\n{line}\n") == [f"3: {line}"]


def test_history_may_keep_the_past_dated():
    page = "# Page\n\nWhat holds.\n\n## History\n\n- 2026-11-27 (commit bac7f99): before the cut, issue 43 read 0.19.\n"
    assert diary_lines(page) == [] and history_faults(page) == []


@pytest.mark.parametrize("history, fault", [("- once, issue 43 read 0.19", "an undated entry"),
                                            ("- 2026-11-27: read 0.19\n\n## More", "a section after"),
                                            ("Some prose.", "without entries")])
def test_a_bad_history_fails(history, fault):
    assert fault in "; ".join(history_faults(f"# Page\n\n## History\n\n{history}\n"))
