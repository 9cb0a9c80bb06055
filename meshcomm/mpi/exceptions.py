"""MPI.Exception and the error classes it carries."""

from __future__ import annotations

SUCCESS = 0
ERR_BUFFER = 1
ERR_COUNT = 2
ERR_TYPE = 3
ERR_TAG = 4
ERR_COMM = 5
ERR_RANK = 6
ERR_ROOT = 7
ERR_GROUP = 8
ERR_OP = 9
ERR_TOPOLOGY = 10
ERR_DIMS = 11
ERR_ARG = 12
ERR_UNKNOWN = 13
ERR_TRUNCATE = 14
ERR_OTHER = 15
ERR_INTERN = 16
ERR_IN_STATUS = 17
ERR_PENDING = 18
ERR_REQUEST = 19
ERR_NOT_SUPPORTED = 52
ERR_LASTCODE = 0x3FFFFFFF

ERROR_NAMES = {
    value: name for name, value in globals().items() if name.startswith("ERR_") or name == "SUCCESS"
}


class Exception(RuntimeError):  # noqa: A001 (mpi4py's name: MPI.Exception)
    """An MPI error: Get_error_class() says which kind, the message says what was wrong."""

    def __init__(self, ierr: int = ERR_OTHER, message: str | None = None) -> None:
        self.ierr = int(ierr)
        self.message = message or ERROR_NAMES.get(self.ierr, "unknown error")
        super().__init__(self.message)

    def Get_error_code(self) -> int:
        return self.ierr

    def Get_error_class(self) -> int:
        return self.ierr

    def Get_error_string(self) -> str:
        return self.message

    error_code = property(Get_error_code)
    error_class = property(Get_error_class)
    error_string = property(Get_error_string)

    def __eq__(self, other) -> bool:
        if isinstance(other, Exception):
            return self.ierr == other.ierr
        if isinstance(other, int):
            return self.ierr == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.ierr)

    def __int__(self) -> int:
        return self.ierr

    def __str__(self) -> str:
        return f"{ERROR_NAMES.get(self.ierr, 'MPI error')}: {self.message}"


def Get_error_class(errorcode: int) -> int:
    return errorcode


def Get_error_string(errorcode: int) -> str:
    return ERROR_NAMES.get(errorcode, f"unknown error code {errorcode}")
