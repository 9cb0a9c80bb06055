"""mpi4py.typing for the shim: the type aliases mpi4py names its buffer and message arguments with."""

from collections.abc import Sequence
from numbers import Integral
from typing import Any, Protocol, Union

from meshcomm import MPI

__all__ = [
    "SupportsBuffer", "SupportsDLPack", "SupportsCAI", "Buffer", "Bottom", "InPlace", "Aint", "Count", "Displ",
    "Offset", "TypeSpec", "BufSpec", "BufSpecB", "BufSpecV", "BufSpecW", "TargetSpec",
]


class SupportsBuffer(Protocol):
    """An object exposing the buffer protocol (bytes, bytearray, array.array, numpy arrays)."""

    def __buffer__(self, flags: int) -> memoryview: ...


class SupportsDLPack(Protocol):
    """An object exporting a DLPack capsule."""

    def __dlpack__(self, *, stream: Any = None) -> Any: ...

    def __dlpack_device__(self) -> tuple[int, int]: ...


class SupportsCAI(Protocol):
    """An object with the CUDA array interface."""

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]: ...


Buffer = Union[SupportsBuffer, SupportsDLPack, SupportsCAI]
Bottom = Union[type(MPI.BOTTOM), None]
InPlace = Union[type(MPI.IN_PLACE), None]
Aint = Integral
Count = Integral
Displ = Integral
Offset = Integral
TypeSpec = Union[MPI.Datatype, str]
BufSpec = Union[Buffer, tuple[Buffer, Count], tuple[Buffer, TypeSpec], tuple[Buffer, Count, TypeSpec], list[Any]]
BufSpecB = Union[Buffer, tuple[Buffer, Count], tuple[Buffer, TypeSpec], tuple[Buffer, Count, TypeSpec], list[Any]]
BufSpecV = Union[Buffer, tuple[Buffer, Sequence[Count]], tuple[Buffer, Sequence[Count], Sequence[Displ]],
                 tuple[Buffer, Sequence[Count], Sequence[Displ], TypeSpec], list[Any]]
BufSpecW = Union[tuple[Buffer, Sequence[MPI.Datatype]], tuple[Buffer, Sequence[Count], Sequence[MPI.Datatype]],
                 tuple[Buffer, Sequence[Count], Sequence[Displ], Sequence[MPI.Datatype]], list[Any]]
TargetSpec = Union[Displ, tuple[()], tuple[Displ], tuple[Displ, Count], tuple[Displ, Count, TypeSpec], list[Any]]
