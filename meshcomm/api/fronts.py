"""The faces' first step in C: a repeated blocking call on numpy arrays goes from the caller to its lane.

A face that keeps lanes (group/lanes.py) still spends about as long in its own
Python, binding arguments, testing them and building the key, as the lane
spends running the call. `fronted` puts a compiled Front (native/fronts.c) in
the face's place, told the face's lane test: what each parameter must be, the
key and which arguments the lane takes. The Front runs what it finds a lane for
and hands every other call to the face unchanged. Without the compiled
extension the face stands as it is. docs/native.md has the whole story.
"""

from __future__ import annotations

import functools
import inspect

import numpy as np

from meshcomm import native
from meshcomm.api import ops as _ops
from meshcomm.api import state
from meshcomm.group.group import Group

# What each face's lane test asks of these parameters; a face names its others.
_SHARED_RULES = {"group": "group", "async_op": "false", "algorithm": "none", "timeout": "none"}
# The rules a Front knows (native/fronts.c): anything; None; False; an int or None; a list, tuple or None; exactly a
# numpy array; exactly a ReduceOp; the group its lanes are found in.
_RULES = frozenset({"any", "none", "false", "root", "list", "array", "op", "group"})


def fronted(key: tuple, sides: tuple[str, str], **rules: str):
    """A decorator: the face, behind a Front that runs a call on the lane whose key (the face's name, then `key`'s
    items) the face itself would build, handing it the `sides` parameters as input and output. Key items are
    parameter names, "p.dtype", "p.shape" or "not p"; `rules` say what a parameter must be ("array", "root",
    "list", "op", "none", "false", "any"), and every parameter needs one."""

    def wrap(face):
        parameters = list(inspect.signature(face).parameters.values())
        names = tuple(p.name for p in parameters)
        all_rules = {**_SHARED_RULES, **rules}
        missing = [name for name in names if name not in all_rules]
        if missing or len(all_rules) != len(names):
            raise ValueError(f"{face.__name__}'s front needs a rule for each parameter, not {sorted(all_rules)}: "
                             f"missing {missing}")
        unknown = {name: rule for name, rule in all_rules.items() if rule not in _RULES}
        if unknown:
            raise ValueError(f"{face.__name__}'s front: rules {unknown} are none of {sorted(_RULES)}")
        if native.core is None:
            return face
        front = native.core.Front(
            face, names, sum(p.kind is p.POSITIONAL_OR_KEYWORD for p in parameters),
            tuple(p.default for p in parameters), inspect.Parameter.empty, tuple(all_rules[n] for n in names),
            (("constant", face.__name__), *(_item(item, names) for item in key)),
            tuple(names.index(side) for side in sides), vars(state), Group, _ops.ReduceOp.RedOpType, np.ndarray)
        return functools.update_wrapper(front, face)

    return wrap


def _item(item: str, names: tuple) -> tuple:
    if item.startswith("not "):
        return "empty", names.index(item[4:])
    name, _, attribute = item.partition(".")
    return attribute or "value", names.index(name)
