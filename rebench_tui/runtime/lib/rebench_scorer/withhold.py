"""Text the participant's code made, kept out of a result that the participant reads.

A scoring room gives the participant's code data the participant never sees (held-out rows,
held-out problems). Whatever that code prints, names or raises can spell the data out, and the
participant reads the result, so a scorer replaces such text with a note and its size::

    from rebench_scorer.withhold import withhold, withheld
    message = withhold(message, ("traceback", "output_tail"), NOTE)

Only text the scorer wrote itself stays as it is.
"""

from __future__ import annotations

from typing import Any


def withheld(value: Any, note: str) -> dict[str, Any]:
    """``value`` as the result shows it: the note, and how much there was."""
    if isinstance(value, (str, bytes)):
        return {"withheld": note, "chars": len(value)}
    if isinstance(value, (list, tuple, dict)):
        return {"withheld": note, "items": len(value)}
    return {"withheld": note}


def withhold(fields: dict[str, Any], keys: tuple[str, ...], note: str) -> dict[str, Any]:
    """A copy of ``fields`` (a result's message or details) with each of ``keys`` that holds
    something replaced by :func:`withheld`."""
    out = dict(fields)
    for key in keys:
        if out.get(key):
            out[key] = withheld(out[key], note)
    return out
