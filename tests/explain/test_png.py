"""PNG output: a real image when matplotlib is there, a clear install hint when it is not."""

from __future__ import annotations

import sys

import pytest

from meshcomm.explain import build_trace, make_problem, render


def test_png_is_an_image_of_the_sheets_size() -> None:
    pytest.importorskip("matplotlib", reason="matplotlib is not installed (pip install 'meshcomm[viz]')")
    from meshcomm.explain.layout import sheet

    trace = build_trace(make_problem("all_reduce", 4, 8), "ring")
    image = render(trace, "png")
    assert isinstance(image, bytes) and image[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(image[16:20], "big"), int.from_bytes(image[20:24], "big")
    page = sheet(trace)
    # The layout's pixels are drawn 1.5 times larger; matplotlib rounds the canvas size down.
    assert abs(width - page.width * 1.5) <= 1 and abs(height - page.height * 1.5) <= 1


def test_missing_matplotlib_names_the_pip_install(monkeypatch: pytest.MonkeyPatch) -> None:
    # A None entry in sys.modules makes `import matplotlib...` fail as if it were not installed.
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match="pip install matplotlib"):
        render(build_trace(make_problem("all_reduce", 2), "ring"), "png")
