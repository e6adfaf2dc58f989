"""Guards on the facts layer's shape: one classifier, passes that ask rather than derive."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [p for d in ("ir", "passes", "ktx") for p in (ROOT / d).rglob("*.py")]


def test_one_load_store_classifier() -> None:
    # three copies once disagreed on __stcs(&p[i]); ir/facts/kinds.py is the only one now
    # what every copy had: an assignment's left side with operator `=` is a store
    pattern = re.compile(r'return "store" if op is not None and op\.type == "="')
    found = sorted(str(p.relative_to(ROOT)) for p in SOURCES if pattern.search(p.read_text()))
    assert found == ["ir/facts/kinds.py"]


def test_facts_never_import_passes() -> None:
    bad = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "ir").rglob("*.py")
        if re.search(r"^\s*from ktx\.passes", p.read_text(), re.M)
    ]
    assert bad == []


def test_vectorize_asks_the_facts() -> None:
    text = (ROOT / "passes" / "vectorize.py").read_text()
    assert len(text.splitlines()) < 900
    assert "module.facts(" in text
    assert "analyze_loop" not in text and "roots(" not in text
