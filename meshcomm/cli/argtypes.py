"""argparse `type=` converters whose errors state the rule (argparse adds the argument's name)."""

from __future__ import annotations

import argparse


def integer(text: str, minimum: int | None = None, maximum: int | None = None) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
    if minimum is not None and value < minimum:
        raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise argparse.ArgumentTypeError(f"must be <= {maximum}, got {value}")
    return value


def positive_int(text: str) -> int:
    return integer(text, minimum=1)


def non_negative_int(text: str) -> int:
    return integer(text, minimum=0)


def port(text: str) -> int:
    return integer(text, minimum=0, maximum=65535)


def fixed_port(text: str) -> int:
    """A port clients can be told in advance, so not 0."""
    return integer(text, minimum=1, maximum=65535)


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0 seconds, got {text}")
    return value
