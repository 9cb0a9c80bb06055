"""Every registered collective and algorithm can be explained, in every format, at 1 to 5 and 8 ranks."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from meshcomm.algorithms import ALGORITHMS
from meshcomm.algorithms.problem import ROOTED
from meshcomm.explain import build_trace, make_problem, render

# Read from the registry when the tests are collected, so algorithms added later are covered without edits here.
CASES = [(collective, name) for collective, names in ALGORITHMS.items() for name in names]
SIZES = (1, 2, 3, 4, 5, 8)


def _traces(collective: str, name: str, sizes=SIZES):
    for n in sizes:
        # A root other than 0 where there is one, so relabelled trees are drawn too.
        root = n // 2 if collective in ROOTED else 0
        yield n, build_trace(make_problem(collective, n, root=root), name)


@pytest.mark.parametrize(("collective", "name"), CASES)
def test_every_algorithm_renders_as_text_svg_and_html(collective: str, name: str) -> None:
    for n, trace in _traces(collective, name):
        assert trace.algorithm == name and trace.nranks == n
        text = render(trace, "text")
        assert text.startswith(f"{collective} / {name} on {n} rank")
        assert f"cost: {trace.cost.steps} step" in text
        for step in trace.steps:
            assert f"step {step.index + 1} of {len(trace.steps)}" in text
        root = ET.fromstring(render(trace, "svg").encode("utf-8"))
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
        page = render(trace, "html")
        assert page.count('<section class="step"') == len(trace.steps) + 1


@pytest.mark.parametrize(("collective", "name"), CASES)
def test_every_algorithm_renders_as_png(collective: str, name: str) -> None:
    pytest.importorskip("matplotlib", reason="matplotlib is not installed (pip install 'meshcomm[viz]')")
    # One size per algorithm: PNG differs from SVG only in the backend drawing the same layout.
    for _, trace in _traces(collective, name, sizes=(5,)):
        image = render(trace, "png")
        assert isinstance(image, bytes) and image.startswith(b"\x89PNG\r\n\x1a\n")


def test_the_cases_cover_the_whole_registry() -> None:
    assert {c for c, _ in CASES} == set(ALGORITHMS)
    assert len(CASES) == sum(len(names) for names in ALGORITHMS.values())
