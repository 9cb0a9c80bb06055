"""The cost model's parameters: α, β per link class, γ and a copy rate, saved as JSON by `meshcomm tune`.

A link class is how two ranks reach each other, which is what their messages
cost: "same_host" pairs talk through shared memory, "other_host" pairs through
TCP. Times are seconds, rates seconds per byte:

- alpha: a message's fixed cost (a wake-up, a header, Python's share of a step);
- beta: each further byte of a message, sender to receiver;
- gamma: each byte reduced into a buffer (numpy ufunc, out of cache);
- copy: each byte copied locally (input to output);
- call: the fixed cost of one collective call before and after its steps
  (argument checks, the schedule lookup); it never changes which algorithm wins;
- crowded_alpha: a same-host message's fixed cost when the host runs more
  ranks than it has cores: the receiver must first be scheduled, not just
  woken, which costs several times alpha (measured, not derived from it);
- board: the whole fixed cost of a small `direct` call on a group's
  shared-memory board (meshcomm/board/segment.py), its per-call work
  included: one synchronisation instead of messages. Files written before it
  existed get the default;
- choices (optional, `meshcomm tune --choices`): the fastest algorithm measured
  per collective, group size and payload (tuner/table.py); files without it,
  written before it existed, load with none.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field

from meshcomm import config
from meshcomm.tuner import table

SAME_HOST = "same_host"
OTHER_HOST = "other_host"
LINK_CLASSES = (SAME_HOST, OTHER_HOST)
FORMAT = "meshcomm-tuning-1"


@dataclass(frozen=True)
class Link:
    alpha: float
    beta: float


@dataclass(frozen=True)
class Parameters:
    same_host: Link
    other_host: Link
    gamma: float
    copy: float
    call: float
    crowded_alpha: float
    board: float = 20e-6
    choices: tuple[table.Measured, ...] = ()
    source: str = field(default="built-in defaults", compare=False)

    def link(self, link_class: str) -> Link:
        return self.same_host if link_class == SAME_HOST else self.other_host

    def to_json(self) -> str:
        raw = {"format": FORMAT, **{k: v for k, v in asdict(self).items() if k not in ("source", "choices")}}
        if self.choices:
            raw["choices"] = table.to_raw(self.choices)
        return json.dumps(raw, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str, source: str) -> "Parameters":
        """Parse `text`; ValueError naming `source` and the bad field instead of a KeyError deep in a call."""
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"tuning file {source} is not JSON: {exc}") from None
        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            raise ValueError(f"tuning file {source} is not a meshcomm tuning file (expected \"format\": \"{FORMAT}\"; "
                             f"write one with `meshcomm tune -o {source}`)")
        links = {}
        for name in LINK_CLASSES:
            entry = raw.get(name)
            if not isinstance(entry, dict):
                raise ValueError(f"tuning file {source}: {name} must be an object with alpha and beta")
            links[name] = Link(_rate(entry, "alpha", f"{source}: {name}"), _rate(entry, "beta", f"{source}: {name}"))
        scalars = {name: _rate(raw, name, source) for name in ("gamma", "copy", "call", "crowded_alpha")}
        if "board" in raw:
            scalars["board"] = _rate(raw, "board", source)
        choices = table.from_raw(raw["choices"], source) if "choices" in raw else ()
        return cls(**links, **scalars, choices=choices, source=source)


def _rate(raw: dict, name: str, where: str) -> float:
    value = raw.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(f"tuning file {where}: {name} must be a number >= 0, got {value!r}")
    return float(value)


# Measured with `meshcomm tune` on the project's 2-core VM (docs/cost-model.md); a machine of
# another kind should run `meshcomm tune` and point MESHCOMM_TUNING at the file. The choices are where the
# model is wrong there: it prices a broadcast the receiver reads by reference like one streamed through the
# rings, which from 1 to 8 MiB on 2 ranks takes less time, and below 1 MiB more; and a gather on the board
# dearer than as messages where, with its members writing into the root's output, it takes far less time: on 3
# to 8 ranks on 2 cores at every size, and on 2 ranks from 8 MiB; and an all_reduce's two-shot, whose compiled
# form on 2 ranks, staged form on 4 ranks on 2 cores and form by reference on 8 beat direct from 256, 16 and
# 64 KiB (docs/cost-model.md).
DEFAULTS = Parameters(
    same_host=Link(alpha=35e-6, beta=0.34e-9),
    other_host=Link(alpha=115e-6, beta=1.0e-9),
    gamma=0.125e-9,
    copy=0.175e-9,
    call=35e-6,
    crowded_alpha=175e-6,
    choices=(table.Measured("all_reduce", 2, 8, "direct"), table.Measured("all_reduce", 2, 256 << 10, "two_shot"),
             table.Measured("all_reduce", 4, 8, "direct"), table.Measured("all_reduce", 4, 16 << 10, "two_shot"),
             table.Measured("all_reduce", 8, 8, "direct"), table.Measured("all_reduce", 8, 64 << 10, "two_shot"),
             table.Measured("broadcast", 2, 8, "direct"), table.Measured("broadcast", 2, 1 << 20, "binomial"),
             table.Measured("broadcast", 2, 8 << 20, "direct"),
             table.Measured("gather", 2, 8, "direct"), table.Measured("gather", 2, 2 << 20, "linear"),
             table.Measured("gather", 2, 8 << 20, "direct"), table.Measured("gather", 3, 8, "direct"),
             table.Measured("gather", 4, 8, "direct"), table.Measured("gather", 8, 8, "direct")),
)


def default_path() -> str:
    """Where `meshcomm tune` saves without -o: $XDG_CACHE_HOME/meshcomm/tuning.json (~/.cache by default)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "meshcomm", "tuning.json")


def load(path: str) -> Parameters:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise ValueError(f"cannot read tuning file {path}: {exc.strerror or exc} "
                         f"(MESHCOMM_TUNING names it; create it with `meshcomm tune -o {path}`)") from None
    return Parameters.from_json(text, path)


def configured() -> Parameters:
    """The parameters MESHCOMM_TUNING names, else the built-in defaults."""
    path = config.get("MESHCOMM_TUNING")
    return load(path) if path else DEFAULTS


def save(parameters: Parameters, path: str) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(parameters.to_json())
