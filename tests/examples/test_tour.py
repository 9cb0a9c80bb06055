"""examples/tour.py, the README's demo: every section in order, each with one line per rank in rank order."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.ranks import run_meshcomm

TOUR = Path(__file__).resolve().parents[2] / "examples" / "tour.py"


@pytest.mark.parametrize("ranks", [1, 3])
def test_the_tour_prints_each_section_whole_and_right(ranks) -> None:
    done = run_meshcomm("run", "-n", str(ranks), "--no-prefix", str(TOUR), timeout=120)
    assert done.returncode == 0, f"the tour failed:\n{done.stdout}\n{done.stderr}"
    sections = re.split(r"\n== ", "\n" + done.stdout.strip())
    assert sections[-1].endswith("barrier passed: every rank reached the end of the tour")
    body = {}
    for section in sections[1:]:
        title, *lines = section.split("\n")
        lines = [line for line in lines if line.startswith("rank ")]
        assert [int(line.split()[1].rstrip(":")) for line in lines] == list(range(ranks)), title
        body[title.split(":")[0].split(" (")[0]] = lines
    assert len(body) == 14
    ring = [line.split("after ")[1] for line in body["isend / irecv around a ring"]]
    assert ring == [f"[{(r - 1) % ranks}]" for r in range(ranks)]
    sums = " ".join(f"{sum(10 * r + c for r in range(ranks)):g}" for c in range(4))
    assert all(line.endswith(f"after [{sums}]") for line in body["all_reduce"])
    assert body["send / recv"][-1].endswith("after [42]")
    exclusive = [line.split("after ")[1] for line in body["exscan"]]
    assert exclusive == ["[1]"] + [f"[{sum(range(1, r + 1))}]" for r in range(1, ranks)]
