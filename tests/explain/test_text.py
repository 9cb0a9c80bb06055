"""The terminal rendering: ring all_reduce read against its definition, alignment, and colour only on request."""

from __future__ import annotations

import re

from meshcomm.explain import build_trace, make_problem, render

N, COUNT = 4, 8
CHUNK = COUNT // N


def _ring_text(color: bool = False) -> str:
    return str(render(build_trace(make_problem("all_reduce", N, COUNT), "ring"), "text", color=color))


def _section(text: str, title: str) -> list[str]:
    """The lines of one block: from the line starting with `title` to the next blank line."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start:end]


def _state_after(text: str, step: int) -> dict[int, list[str]]:
    """rank -> the cells of every chunk column in the table printed after `step`."""
    lines = _section(text, f"step {step} of")
    first = lines.index(f"  after step {step}:")
    rows = {}
    for line in lines[first + 3 :]:
        match = re.fullmatch(r"\s+rank (\d+)\s+(.*)", line)
        assert match, line
        rows[int(match.group(1))] = match.group(2).split()
    return rows


def _chunk(c: int) -> str:
    return f"output[{c * CHUNK}:{(c + 1) * CHUNK}]"


def test_ring_step_one_sends_each_ranks_own_chunk_to_the_right_neighbour_to_reduce() -> None:
    # Ring all_reduce, reduce-scatter phase, step s = 0: rank r sends chunk (r - s) mod n = r,
    # still holding only its own input, to rank r + 1, which adds it into its own chunk r.
    text = _ring_text()
    step = "\n".join(_section(text, "step 1 of"))
    for r in range(N):
        right = (r + 1) % N
        pattern = rf"rank {r} -> rank {right}\s+{re.escape(_chunk(r))}\s+{r}\s+reduced into {re.escape(_chunk(r))}"
        assert re.search(pattern, step), (pattern, step)
    assert len(re.findall(r"rank \d -> rank \d", step)) == N  # nothing else is sent in step 1


def test_ring_after_step_one_each_receiver_holds_the_pair_sum_in_the_received_chunk() -> None:
    rows = _state_after(_ring_text(), 1)
    for r in range(N):
        right = (r + 1) % N
        pair = "+".join(str(x) for x in sorted((r, right)))
        assert rows[right][r] == pair + "*"


def test_ring_ends_with_every_rank_holding_the_full_sum_in_every_chunk() -> None:
    text = _ring_text()
    steps = 2 * (N - 1)  # reduce-scatter then all-gather, n - 1 steps each
    assert f"step {steps} of {steps}" in text and f"step {steps + 1} of" not in text
    full = "+".join(str(r) for r in range(N))
    rows = _state_after(text, steps)
    assert sorted(rows) == list(range(N))
    for cells in rows.values():
        assert [cell.rstrip("*") for cell in cells] == [full] * N


def test_ring_all_gather_phase_stores_instead_of_reducing() -> None:
    step = "\n".join(_section(_ring_text(), f"step {N} of"))
    assert "reduced into" not in step
    assert step.count("stored in") == N


def test_cost_summary_counts_the_rings_messages_and_bytes() -> None:
    # 2(n-1) steps of n messages of one chunk (count/n float32 elements); n-1 steps of them reduced.
    messages = 2 * (N - 1) * N
    wire = messages * CHUNK * 4
    reduced = (N - 1) * N * CHUNK * 4
    assert f"cost: {2 * (N - 1)} steps, {messages} messages" in _ring_text()
    assert f"= {wire} bytes on the wire" in _ring_text()
    assert f"= {reduced} bytes reduced (float32)" in _ring_text()


def test_state_columns_are_aligned_under_their_headers() -> None:
    lines = _section(_ring_text(), "step 3 of")
    first = lines.index("  after step 3:")
    header, *rows = lines[first + 2 :]
    starts = [m.start() for m in re.finditer(r"\S+", header)]
    for row in rows:
        cells = [m.start() for m in re.finditer(r"\S+", row)][2:]  # skip "rank" and its number
        assert cells == starts, (header, row)


def test_plain_text_has_no_escape_codes_and_colour_adds_them() -> None:
    assert "\x1b[" not in _ring_text(color=False)
    coloured = _ring_text(color=True)
    assert "\x1b[" in coloured
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == _ring_text(color=False)


def test_barrier_shows_who_each_rank_has_heard_from() -> None:
    text = str(render(build_trace(make_problem("barrier", 5), "dissemination"), "text"))
    final = _section(text, "step 3 of")
    for r in range(5):
        assert f"rank {r}  heard from 0..4" in "\n".join(final)
    assert "(empty)" in text
