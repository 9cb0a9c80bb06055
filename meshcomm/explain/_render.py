"""One place that picks a renderer by format name; each renderer is imported only when asked for."""

from __future__ import annotations

import importlib
from typing import Union

from meshcomm.explain.model import Trace

# format -> module with render(trace, ...); png returns bytes, the others text
FORMATS: dict[str, str] = {
    "text": "meshcomm.explain.text",
    "svg": "meshcomm.explain.svg",
    "html": "meshcomm.explain.html",
    "png": "meshcomm.explain.png",
}


def render(trace: Trace, fmt: str = "text", color: bool = False) -> Union[str, bytes]:
    """`trace` drawn in `fmt`; `color` adds ANSI colours to text (the other formats are always coloured)."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    module = importlib.import_module(FORMATS[fmt])
    if fmt == "text":
        return module.render(trace, color=color)
    return module.render(trace)
