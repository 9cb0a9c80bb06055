"""MPI.Exception, the error classes it carries, and the error classes and codes a program adds.

The predefined classes have MPICH's numbers. Classes and codes a program
adds (Add_error_class, Add_error_code) are numbered above ERR_LASTCODE, as
MPICH numbers them, and each may carry a string (Add_error_string).
"""

from __future__ import annotations

import numbers
import threading

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
ERR_ACCESS = 20
ERR_AMODE = 21
ERR_BAD_FILE = 22
ERR_CONVERSION = 23
ERR_DUP_DATAREP = 24
ERR_FILE_EXISTS = 25
ERR_FILE_IN_USE = 26
ERR_FILE = 27
ERR_INFO = 28
ERR_INFO_KEY = 29
ERR_INFO_VALUE = 30
ERR_INFO_NOKEY = 31
ERR_IO = 32
ERR_NAME = 33
ERR_NO_MEM = 34
ERR_NOT_SAME = 35
ERR_NO_SPACE = 36
ERR_NO_SUCH_FILE = 37
ERR_PORT = 38
ERR_QUOTA = 39
ERR_READ_ONLY = 40
ERR_SERVICE = 41
ERR_SPAWN = 42
ERR_UNSUPPORTED_DATAREP = 43
ERR_UNSUPPORTED_OPERATION = 44
ERR_KEYVAL = 48
ERR_DISP = 52
ERR_SESSION = 75
ERR_PROC_ABORTED = 76
ERR_VALUE_TOO_LARGE = 77
# Classes MPICH has no number of its own for.
ERR_ERRHANDLER = 78
ERR_ABI = 79
ERR_PROC_FAILED = 80
ERR_PROC_FAILED_PENDING = 81
ERR_REVOKED = 82
# One-sided communication (MPICH's values).
ERR_WIN = 45
ERR_BASE = 46
ERR_LOCKTYPE = 47
ERR_RMA_CONFLICT = 49
ERR_RMA_SYNC = 50
ERR_SIZE = 51
ERR_ASSERT = 53
ERR_RMA_RANGE = 55
ERR_RMA_ATTACH = 56
ERR_RMA_SHARED = 57
ERR_RMA_FLAVOR = 58
ERR_LASTCODE = 0x3FFFFFFF

ERROR_NAMES = {
    value: name for name, value in globals().items() if name.startswith("ERR_") or name == "SUCCESS"
}
# What the face's modules raise for a case they leave out; MPI's name for it is ERR_UNSUPPORTED_OPERATION.
ERR_NOT_SUPPORTED = ERR_UNSUPPORTED_OPERATION

_STRINGS = {
    SUCCESS: "No MPI error", ERR_BUFFER: "Invalid buffer pointer", ERR_COUNT: "Invalid count",
    ERR_TYPE: "Invalid datatype", ERR_TAG: "Invalid tag", ERR_COMM: "Invalid communicator",
    ERR_RANK: "Invalid rank", ERR_ROOT: "Invalid root", ERR_GROUP: "Invalid group", ERR_OP: "Invalid MPI_Op",
    ERR_TOPOLOGY: "Invalid topology", ERR_DIMS: "Invalid dimension argument", ERR_ARG: "Invalid argument",
    ERR_UNKNOWN: "Unknown error", ERR_TRUNCATE: "Message truncated", ERR_OTHER: "Other MPI error",
    ERR_INTERN: "Internal MPI error", ERR_IN_STATUS: "See the MPI_ERROR field in MPI_Status for the error code",
    ERR_PENDING: "Pending request (no error)", ERR_REQUEST: "Invalid MPI_Request",
    ERR_ACCESS: "Permission denied", ERR_AMODE: "Invalid amode value", ERR_BAD_FILE: "Invalid file name",
    ERR_CONVERSION: "An error occurred in a user-supplied data conversion function",
    ERR_DUP_DATAREP: "Conversion functions could not be registered: the data representation already exists",
    ERR_FILE_EXISTS: "File exists", ERR_FILE_IN_USE: "File in use by some process", ERR_FILE: "Invalid MPI_File",
    ERR_INFO: "Invalid MPI_Info", ERR_INFO_KEY: "Invalid key for MPI_Info", ERR_INFO_VALUE: "Invalid MPI_Info value",
    ERR_INFO_NOKEY: "MPI_Info key is not defined", ERR_IO: "Other I/O error", ERR_NAME: "Invalid service name",
    ERR_NO_MEM: "Alloc_mem could not allocate the requested memory",
    ERR_NOT_SAME: "Collective argument not identical on all processes", ERR_NO_SPACE: "Not enough space",
    ERR_NO_SUCH_FILE: "File does not exist", ERR_PORT: "Invalid port", ERR_QUOTA: "Quota exceeded",
    ERR_READ_ONLY: "Read-only file or filesystem", ERR_SERVICE: "Attempt to unpublish an unknown service name",
    ERR_SPAWN: "Error in spawn call", ERR_UNSUPPORTED_DATAREP: "Unsupported data representation",
    ERR_UNSUPPORTED_OPERATION: "Operation not supported", ERR_KEYVAL: "Invalid keyval",
    ERR_DISP: "Invalid displacement argument", ERR_SESSION: "Invalid session",
    ERR_PROC_ABORTED: "A process in the operation has aborted", ERR_VALUE_TOO_LARGE: "Value is too large to store",
    ERR_ERRHANDLER: "Invalid error handler", ERR_ABI: "ABI mismatch", ERR_PROC_FAILED: "Process failed",
    ERR_PROC_FAILED_PENDING: "Process failed; the operation is pending", ERR_REVOKED: "Communication revoked",
    ERR_WIN: "Invalid MPI_Win", ERR_BASE: "Invalid base address", ERR_LOCKTYPE: "Invalid lock type",
    ERR_RMA_CONFLICT: "Conflicting accesses to window", ERR_RMA_SYNC: "Wrong synchronization of RMA calls",
    ERR_SIZE: "Invalid size argument", ERR_ASSERT: "Invalid assert argument",
    ERR_RMA_RANGE: "Target memory is not part of the window", ERR_RMA_ATTACH: "Memory cannot be attached",
    ERR_RMA_SHARED: "Memory cannot be shared", ERR_RMA_FLAVOR: "Passed window has incorrect flavor",
    ERR_LASTCODE: "Last error code",
}


class _Added:
    """The classes and codes a program added: each added code's class and string, guarded by one lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.class_of: dict[int, int] = {}  # added code (a class is its own class) -> class
        self.strings: dict[int, str] = {}
        self.last_used = ERR_LASTCODE


_added = _Added()


class Exception(RuntimeError):  # noqa: A001 (mpi4py's name: MPI.Exception)
    """An MPI error: Get_error_class() says which kind, the message says what was wrong."""

    def __init__(self, ierr: int = SUCCESS, message: str | None = None) -> None:
        ierr = int(ierr)
        # MPI has no negative codes; mpi4py reads one as an unknown error.
        self.ierr = ERR_UNKNOWN if ierr < SUCCESS else ierr
        self._detail = message  # what was wrong, beyond the error class's text
        self.message = message or self.Get_error_string()
        super().__init__(self.ierr if message is None else message)

    def Get_error_code(self) -> int:
        return self.ierr

    def Get_error_class(self) -> int:
        return _class_or(self.ierr, ERR_UNKNOWN)

    def Get_error_string(self) -> str:
        return _string_or(self.ierr, f"unknown error code {self.ierr}")

    error_code = property(Get_error_code)
    error_class = property(Get_error_class)
    error_string = property(Get_error_string)

    def _other(self, other) -> int | None:
        if isinstance(other, Exception):
            return other.ierr
        if isinstance(other, int):
            return other
        return None

    def _compare(test):
        def compare(self, other):
            value = self._other(other)
            return NotImplemented if value is None else test(self.ierr, value)

        return compare

    __eq__ = _compare(int.__eq__)
    __ne__ = _compare(int.__ne__)
    __lt__ = _compare(int.__lt__)
    __le__ = _compare(int.__le__)
    __gt__ = _compare(int.__gt__)
    __ge__ = _compare(int.__ge__)
    del _compare

    def __hash__(self) -> int:
        return hash(self.ierr)

    def __int__(self) -> int:
        return self.ierr

    def __bool__(self) -> bool:
        return self.ierr != SUCCESS

    def __repr__(self) -> str:
        return f"MPI.Exception({self.ierr})"

    def __str__(self) -> str:
        if self._detail is None:
            return self.Get_error_string()
        return f"{ERROR_NAMES.get(self.ierr, 'MPI error')}: {self._detail}"


def _class_or(code: int, default: int) -> int:
    if code in _STRINGS:
        return code
    return _added.class_of.get(code, default)


def _string_or(code: int, default: str) -> str:
    if code in _STRINGS:
        return _STRINGS[code]
    if code in _added.class_of:
        return _added.strings.get(code, "")
    return default


def _known(code) -> int:
    if isinstance(code, bool) or not isinstance(code, numbers.Integral):
        raise TypeError(f"errorcode must be an int, got {type(code).__name__}")
    code = int(code)
    if code not in _STRINGS and code not in _added.class_of:
        raise Exception(ERR_ARG, f"{code} is neither a predefined error class nor an added class or code")
    return code


def Get_error_class(errorcode: int) -> int:
    """The error class of an error code (a class is its own class)."""
    return _class_or(_known(errorcode), ERR_UNKNOWN)


def Get_error_string(errorcode: int) -> str:
    """The text of an error code; an added code without Add_error_string has ''."""
    return _string_or(_known(errorcode), "")


def _add(errorclass: int | None) -> int:
    with _added.lock:
        _added.last_used += 1
        code = _added.last_used
        _added.class_of[code] = code if errorclass is None else errorclass
        return code


def Add_error_class() -> int:
    """A new error class, numbered above ERR_LASTCODE (and above every earlier one)."""
    return _add(None)


def Add_error_code(errorclass: int) -> int:
    """A new error code of `errorclass` (a predefined or added class)."""
    if _class_or(_known(errorclass), None) != errorclass:
        raise Exception(ERR_ARG, f"{errorclass} is an error code, not an error class")
    return _add(errorclass)


def _added_code(code, what: str) -> int:
    if _known(code) not in _added.class_of:
        raise Exception(ERR_ARG, f"{what} {code} is predefined; only added classes and codes can change")
    return code


def Add_error_string(errorcode: int, string: str) -> None:
    if not isinstance(string, str):
        raise TypeError(f"string must be a str, got {type(string).__name__}")
    with _added.lock:
        _added.strings[_added_code(errorcode, "error code")] = string


def Remove_error_string(errorcode: int) -> None:
    with _added.lock:
        code = _added_code(errorcode, "error code")
        if code not in _added.strings:
            raise Exception(ERR_ARG, f"error code {code} has no string to remove")
        del _added.strings[code]


def Remove_error_code(errorcode: int) -> None:
    """Remove an added code; its string must have been removed first, as MPI requires."""
    with _added.lock:
        code = _added_code(errorcode, "error code")
        if _added.class_of[code] == code:
            raise Exception(ERR_ARG, f"{code} is an error class: remove it with Remove_error_class")
        if code in _added.strings:
            raise Exception(ERR_ARG, f"error code {code} still has a string: remove it first")
        del _added.class_of[code]


def Remove_error_class(errorclass: int) -> None:
    """Remove an added class; its codes and its string must have been removed first."""
    with _added.lock:
        code = _added_code(errorclass, "error class")
        if _added.class_of[code] != code:
            raise Exception(ERR_ARG, f"{code} is an error code: remove it with Remove_error_code")
        if code in _added.strings:
            raise Exception(ERR_ARG, f"error class {code} still has a string: remove it first")
        codes = [c for c, k in _added.class_of.items() if k == code and c != code]
        if codes:
            raise Exception(ERR_ARG, f"error class {code} still has codes {codes}: remove them first")
        del _added.class_of[code]


def last_used_code() -> int:
    """The highest class or code added so far (ERR_LASTCODE before any): the LASTUSEDCODE attribute."""
    return _added.last_used
