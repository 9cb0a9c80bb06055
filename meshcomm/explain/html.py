"""A self-contained HTML page for a trace: one inline SVG per step, a step slider and a play button."""

from __future__ import annotations

from html import escape

from meshcomm.explain.layout import cost_line, panels
from meshcomm.explain.model import Trace
from meshcomm.explain.svg import panel_svg
from meshcomm.explain.text import operation_lines

__all__ = ["render"]

# Without JavaScript every step stays visible one under the other; the script
# hides all but the chosen one, so the page degrades to a long read.
_STYLE = """
body { font-family: "DejaVu Sans", Verdana, Arial, sans-serif; margin: 24px; color: #212529; }
h1 { font-size: 20px; margin: 0 0 8px; }
p { margin: 4px 0; font-size: 13px; }
.muted { color: #868e96; }
.controls { position: sticky; top: 0; background: #ffffff; padding: 10px 0; border-bottom: 1px solid #dee2e6;
            display: flex; gap: 10px; align-items: center; }
.controls input[type=range] { width: 320px; }
.controls button { font-size: 14px; min-width: 56px; }
.step { margin: 16px 0; }
.step pre { font-size: 12px; background: #f8f9fa; padding: 8px; overflow-x: auto; }
body.js .step { display: none; }
body.js .step.shown { display: block; }
"""

_SCRIPT = """
(function () {
  var steps = document.querySelectorAll(".step");
  var slider = document.getElementById("slider");
  var label = document.getElementById("where");
  var play = document.getElementById("play");
  var timer = null;
  document.body.classList.add("js");
  function show(i) {
    i = Math.max(0, Math.min(steps.length - 1, i));
    slider.value = i;
    for (var k = 0; k < steps.length; k++) { steps[k].classList.toggle("shown", k === i); }
    label.textContent = steps[i].getAttribute("data-title");
  }
  function stop() { if (timer !== null) { clearInterval(timer); timer = null; play.textContent = "play"; } }
  function tick() { if (+slider.value >= steps.length - 1) { stop(); } else { show(+slider.value + 1); } }
  slider.addEventListener("input", function () { stop(); show(+slider.value); });
  document.getElementById("prev").addEventListener("click", function () { stop(); show(+slider.value - 1); });
  document.getElementById("next").addEventListener("click", function () { stop(); show(+slider.value + 1); });
  play.addEventListener("click", function () {
    if (timer !== null) { stop(); return; }
    if (+slider.value >= steps.length - 1) { show(0); }
    play.textContent = "pause";
    timer = setInterval(tick, 1400);
  });
  document.addEventListener("keydown", function (e) {
    if (e.key === "ArrowRight") { stop(); show(+slider.value + 1); }
    if (e.key === "ArrowLeft") { stop(); show(+slider.value - 1); }
  });
  show(0);
})();
"""


def render(trace: Trace) -> str:
    laid = panels(trace)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f"<title>meshcomm explain: {escape(trace.title)}</title>",
        f"<style>{_STYLE}</style>",
        "</head>",
        "<body>",
        f"<h1>{escape(trace.title)}</h1>",
        f'<p class="muted">{escape(trace.legend[0].upper() + trace.legend[1:])}. Orange border: changed by this '
        "step; green border: holds the final result. Red arrows are received and reduced, blue ones received and "
        "stored, dashed ones local copies or reductions.</p>",
        f"<p>cost: {escape(cost_line(trace))}.</p>",
        '<div class="controls">',
        '<button id="prev" type="button">&#9664;</button>',
        '<button id="play" type="button">play</button>',
        '<button id="next" type="button">&#9654;</button>',
        f'<input id="slider" type="range" min="0" max="{len(laid) - 1}" value="0" aria-label="step">',
        f'<span id="where">{escape(laid[0].title)}</span>',
        "</div>",
    ]
    for index, panel in enumerate(laid):
        parts.append(f'<section class="step" data-title="{escape(panel.title)}">')
        parts.append(panel_svg(panel, trace.title, namespace=False))
        if index > 0:
            lines = operation_lines(trace.steps[index - 1])
            parts.append(f"<pre>{escape(chr(10).join(lines))}</pre>")
        parts.append("</section>")
    parts.extend([f"<script>{_SCRIPT}</script>", "</body>", "</html>"])
    return "\n".join(parts) + "\n"
