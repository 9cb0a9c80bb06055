"""The user's algorithm override: MESHCOMM_ALGO and `meshcomm bench --algo` text, parsed and checked.

Names only: when the user names none, meshcomm/tuner/ predicts every
algorithm's time and the group takes the fastest.
"""

from __future__ import annotations


def parse_override(text: str, known: dict[str, dict], source: str = "MESHCOMM_ALGO",
                   scope: list[str] | None = None) -> dict[str, str]:
    """'ring' (every collective in `scope`, default all, that has it) or 'all_reduce:ring;broadcast:chain'
    (',' separates too). Errors name `source`, the setting or option the text came from."""
    scope = list(known) if scope is None else scope
    chosen: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.replace(",", ";").split(";"))):
        if ":" in part:
            collective, name = (x.strip() for x in part.split(":", 1))
            if collective not in known:
                raise ValueError(f"{source} names unknown collective {collective!r}; known: {', '.join(known)}")
            if name not in known[collective]:
                raise ValueError(f"{source}: {collective} has no algorithm {name!r}; "
                                 f"choose one of: {', '.join(known[collective])}")
            chosen[collective] = name
            continue
        matching = [c for c in scope if part in known.get(c, {})]
        if not matching:
            raise ValueError(f"{source} {part!r}: none of {', '.join(scope)} has an algorithm of that name")
        for collective in matching:
            chosen.setdefault(collective, part)
    return chosen

