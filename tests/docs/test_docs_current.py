"""docs/ is what docs/generate.py writes: a page per collective, a section and a picture per algorithm, small."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from meshcomm.algorithms import ALGORITHMS

DOCS = Path(__file__).resolve().parents[2] / "docs"


def load_generator():
    spec = importlib.util.spec_from_file_location("docs_generate", DOCS / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_docs_are_what_the_script_generates() -> None:
    generator = load_generator()
    stale = [str(path.relative_to(DOCS)) for path in generator.stale(generator.generate())]
    assert stale == [], "docs are out of date: run python docs/generate.py"


def test_every_algorithm_has_a_section_a_cost_table_and_a_picture() -> None:
    for collective, algorithms in ALGORITHMS.items():
        page = (DOCS / "collectives" / f"{collective}.md").read_text(encoding="utf-8")
        for name in algorithms:
            assert f"\n## {name}\n" in page
            assert f"](img/{collective}-{name}.svg)" in page
            assert (DOCS / "collectives" / "img" / f"{collective}-{name}.svg").is_file()
        assert "| ranks | steps | messages | bytes on the wire |" in page


def test_docs_stay_small() -> None:
    total = sum(path.stat().st_size for path in DOCS.rglob("*") if path.is_file())
    assert total < 3 << 20
