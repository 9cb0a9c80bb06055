"""ReduceOp, with torch.distributed's names (and premul_sum scaling)."""

from __future__ import annotations

from typing import NamedTuple


class _Op(NamedTuple):
    """A reduction: a tuple, so that hashing one (every lane key holds its op) runs in C, not in a Python __hash__."""

    name: str
    factor: float | None = None

    def __repr__(self) -> str:
        return f"<ReduceOp.{self.name.upper()}{'' if self.factor is None else f' x{self.factor}'}>"


class ReduceOp:
    SUM = _Op("sum")
    PRODUCT = _Op("product")
    MIN = _Op("min")
    MAX = _Op("max")
    BAND = _Op("band")
    BOR = _Op("bor")
    BXOR = _Op("bxor")
    AVG = _Op("avg")
    PREMUL_SUM = _Op("premul_sum", 1.0)

    RedOpType = _Op

    @staticmethod
    def premul_sum(factor: float) -> _Op:
        """Sum of factor * x over ranks (the factor is applied once, after the sum)."""
        return _Op("premul_sum", float(factor))


def _make_nccl_premul_sum(factor: float) -> _Op:
    """torch.distributed's spelling of ReduceOp.premul_sum."""
    return ReduceOp.premul_sum(factor)


def resolve(op) -> _Op:
    """Accept our ReduceOp, torch's ReduceOp, or a name; TypeError otherwise."""
    if isinstance(op, _Op):
        return op
    if isinstance(op, str) and op.lower() in _BY_NAME:
        return _BY_NAME[op.lower()]
    name = getattr(op, "name", None) or str(op).rsplit(".", 1)[-1]
    if isinstance(name, str) and name.lower() in _BY_NAME:
        return _BY_NAME[name.lower()]
    raise TypeError(f"op must be a ReduceOp (SUM, PRODUCT, MIN, MAX, BAND, BOR, BXOR, AVG), got {op!r}")


_BY_NAME = {op.name: op for op in vars(ReduceOp).values() if isinstance(op, _Op)}
