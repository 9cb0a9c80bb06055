"""`meshcomm explain`: step-by-step pictures of every collective's algorithms, drawn from their schedules."""

from __future__ import annotations

from meshcomm.explain._render import FORMATS, render
from meshcomm.explain.model import Trace, build_trace, make_problem

__all__ = ["FORMATS", "Trace", "build_trace", "make_problem", "render"]
