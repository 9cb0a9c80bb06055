"""MPI.File: parallel file access by the ranks of a communicator, on POSIX files.

Every rank opens the file itself (rank 0 first, so it alone creates it)
and reads and writes its view's bytes with pread/pwrite. Collective calls
agree on success first: if any rank fails, every rank raises, naming the
rank and its error. The individual file pointer is this rank's; the shared
one is a counter in a window on rank 0 (pointer.py). Collective data
access (`*_all`) needs no more coordination than the independent forms,
except the ordered ones, which place each rank's data after the lower
ranks'. Nonblocking and split-collective accesses complete when they
start. With atomicity set, each access holds a POSIX record lock over the
bytes it touches, so concurrent overlapping accesses do not interleave.
See docs/mpi.md.
"""

from __future__ import annotations

import errno
import os

import numpy as np

from meshcomm.mpi import constants as C
from meshcomm.mpi import errhandler as handlers
from meshcomm.mpi import exceptions as err
from meshcomm.mpi import messages as msg
from meshcomm.mpi import status as st
from meshcomm.mpi.comm import Intracomm
from meshcomm.mpi.datatypes import PREDEFINED, Datatype
from meshcomm.mpi.handles import Handle, Referent
from meshcomm.mpi.info import INFO_NULL, Info
from meshcomm.mpi.io import posix
from meshcomm.mpi.io.pointer import SharedPointer
from meshcomm.mpi.io.view import View
from meshcomm.mpi.request import Operation, Request

MODE_CREATE, MODE_RDONLY, MODE_WRONLY, MODE_RDWR = 1, 2, 4, 8
MODE_DELETE_ON_CLOSE, MODE_UNIQUE_OPEN, MODE_EXCL, MODE_APPEND, MODE_SEQUENTIAL = 16, 32, 64, 128, 256
SEEK_SET, SEEK_CUR, SEEK_END = 600, 602, 604
DISPLACEMENT_CURRENT = -54278278

def _agree(comm: Intracomm, failure: err.Exception | None, what: str) -> None:
    """Collective: raise on every rank if any rank failed (its own error, or the first failing rank's)."""
    codes = comm.allgather((failure.Get_error_class(), str(failure)) if failure is not None else None)
    if failure is not None:
        raise failure
    for rank, code in enumerate(codes):
        if code is not None:
            raise err.Exception(code[0], f"{what} failed on rank {rank}: {code[1]}")


class _Done(Operation):
    """A file access that finished when it started: its status counts the bytes it moved."""

    def __init__(self, nbytes: int) -> None:
        super().__init__(None, None)
        self.nbytes = nbytes

    def complete(self, into: st.Status):
        self.posted, self.started = None, False
        into._set(C.ANY_SOURCE, C.ANY_TAG, self.nbytes)


class _Open(Referent):
    """What an open File names."""

    def __init__(self, comm: Intracomm, fd: int, path: str, amode: int, info: dict[str, str]) -> None:
        super().__init__()
        self.comm, self.fd, self.path, self.amode, self.info = comm, fd, path, amode, info
        self.view = View(0, PREDEFINED["BYTE"], PREDEFINED["BYTE"])
        self.position = 0  # the individual file pointer, in etypes of the view
        self.shared = SharedPointer(comm)
        self.atomic = False
        self.split: tuple[str, int] | None = None  # a split collective begun and not ended: (name, bytes)


def _status(status: st.Status | None, nbytes: int) -> None:
    if status is not None:
        status._set(C.ANY_SOURCE, C.ANY_TAG, nbytes)


def _etypes(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    return int(value)


class File(Handle):
    """An open file; FILE_NULL when closed or never opened."""

    _null_name = "FILE_NULL"
    _free_call = "Close"

    @property
    def _f(self) -> _Open:
        if self._ref is None:
            raise err.Exception(err.ERR_FILE, "this is FILE_NULL (or a closed file)")
        return self._ref

    # ----- opening and closing

    @classmethod
    def Open(cls, comm, filename, amode: int = MODE_RDONLY, info: Info = INFO_NULL) -> "File":
        """Collective: every rank of `comm` opens `filename` (str, bytes or a path) with access mode `amode`."""
        if not isinstance(comm, Intracomm) or not comm:
            raise err.Exception(err.ERR_COMM, f"File.Open needs an intracommunicator, got {comm!r}")
        path = os.fsdecode(os.fspath(filename))
        flags = _flags(_checked_amode(amode))
        filecomm = comm.Dup()  # the file's own collectives never meet the caller's messages
        fd, failure = -1, None
        creating = flags & os.O_CREAT
        try:
            if filecomm.Get_rank() == 0 or not creating:
                fd, failure = posix.open_file(path, flags)
            if creating:  # the others open once rank 0 has created it, without O_EXCL
                _agree(filecomm, failure, f"File.Open of {path!r}")
                if filecomm.Get_rank() != 0:
                    fd, failure = posix.open_file(path, flags & ~(os.O_CREAT | os.O_EXCL))
            _agree(filecomm, failure, f"File.Open of {path!r}")
        except err.Exception:
            if fd >= 0:
                os.close(fd)
            filecomm.Free()
            raise
        items = dict(info.items()) if isinstance(info, Info) and info else {}
        opened = cls._naming(_Open(filecomm, fd, path, int(amode), items))
        default = FILE_NULL.Get_errhandler()
        opened.Set_errhandler(default)
        default.Free()
        if amode & MODE_APPEND:
            end = opened._end_position()
            opened._ref.position = end
            if filecomm.Get_rank() == 0:
                opened._ref.shared.set(end)
            filecomm.Barrier()
        return opened

    def Close(self) -> None:
        """Collective: every rank's accesses are done; the file is deleted if opened with MODE_DELETE_ON_CLOSE."""
        f = self._f
        f.shared.free()  # collective: no rank moves the shared pointer after this
        os.close(f.fd)
        f.comm.Barrier()
        if f.amode & MODE_DELETE_ON_CLOSE and f.comm.Get_rank() == 0:
            try:
                os.unlink(f.path)
            except FileNotFoundError:
                pass
        f.comm.Free()
        self._forget()

    @staticmethod
    def Delete(filename, info: Info = INFO_NULL) -> None:
        path = os.fsdecode(os.fspath(filename))
        try:
            os.unlink(path)
        except OSError as error:
            raise posix.mpi_error(error, f"File.Delete of {path!r}") from None

    # ----- size, group, mode, info

    def Get_size(self) -> int:
        return os.fstat(self._f.fd).st_size

    def Set_size(self, size: int) -> None:
        """Collective: truncate or extend the file to `size` bytes."""
        self._resize(_etypes(size, "size"), grow_only=False)

    def Preallocate(self, size: int) -> None:
        """Collective: make the file at least `size` bytes long (it never shrinks)."""
        self._resize(_etypes(size, "size"), grow_only=True)

    def _resize(self, size: int, grow_only: bool) -> None:
        f = self._f
        what = "Preallocate" if grow_only else "Set_size"
        # Agreeing first also means no rank still reads or writes the old extent when rank 0 resizes it.
        _agree(f.comm, err.Exception(err.ERR_ARG, f"size must be >= 0, got {size}") if size < 0 else None, what)
        failure = None
        if f.comm.Get_rank() == 0 and not (grow_only and os.fstat(f.fd).st_size >= size):
            try:
                os.ftruncate(f.fd, size)
            except OSError as error:
                failure = posix.mpi_error(error, f"resizing {f.path!r}")
        _agree(f.comm, failure, what)

    def Get_group(self):
        return self._f.comm.Get_group()

    def Get_amode(self) -> int:
        return self._f.amode

    def Get_info(self) -> Info:
        return Info.Create(self._f.info)

    def Set_info(self, info: Info) -> None:
        if not isinstance(info, Info):
            raise TypeError(f"info must be an MPI.Info, got {type(info).__name__}")
        self._f.info.update(info.items() if info else ())

    size = property(Get_size)
    amode = property(Get_amode)
    group = property(Get_group)
    group_size = property(lambda self: self._f.comm.Get_size())
    group_rank = property(lambda self: self._f.comm.Get_rank())
    info = property(Get_info, Set_info)

    # ----- views and pointers

    def Set_view(self, disp: int = 0, etype: Datatype | None = None, filetype: Datatype | None = None,
                 datarep: str = "native", info: Info = INFO_NULL) -> None:
        """Collective: this rank's view of the file; both file pointers go back to 0."""
        f = self._f
        etype = PREDEFINED["BYTE"] if etype is None else etype
        view, failure = None, None
        try:
            view = View(disp, etype, etype if filetype is None else filetype, datarep)
        except err.Exception as error:
            failure = error
        _agree(f.comm, failure, "Set_view")
        f.view, f.position = view, 0
        if f.comm.Get_rank() == 0:
            f.shared.set(0)
        f.comm.Barrier()

    def Get_view(self) -> tuple[int, Datatype, Datatype, str]:
        """(disp, etype, filetype, datarep); derived types come back as new handles to Free."""
        view = self._f.view

        def handed(datatype: Datatype) -> Datatype:
            return datatype if datatype.is_predefined else datatype.Dup()

        return view.disp, handed(view.etype), handed(view.filetype), view.datarep

    def Seek(self, offset: int, whence: int = SEEK_SET) -> None:
        f = self._f
        f.position = self._sought(_etypes(offset, "offset"), whence, f.position)

    def Get_position(self) -> int:
        return self._f.position

    def Seek_shared(self, offset: int, whence: int = SEEK_SET) -> None:
        """Collective: every rank passes the same offset and whence."""
        f = self._f
        failure = None
        if f.comm.Get_rank() == 0:
            try:
                f.shared.set(self._sought(_etypes(offset, "offset"), whence, f.shared.get()))
            except (err.Exception, TypeError) as error:
                failure = error if isinstance(error, err.Exception) else err.Exception(err.ERR_ARG, str(error))
        _agree(f.comm, failure, "Seek_shared")

    def Get_position_shared(self) -> int:
        return self._f.shared.get()

    def _sought(self, offset: int, whence: int, current: int) -> int:
        bases = {SEEK_SET: 0, SEEK_CUR: current}
        if whence == SEEK_END:
            base = self._end_position()
        elif whence in bases:
            base = bases[whence]
        else:
            raise err.Exception(err.ERR_ARG, f"whence must be SEEK_SET, SEEK_CUR or SEEK_END, got {whence}")
        if base + offset < 0:
            raise err.Exception(err.ERR_ARG, f"seeking to {base + offset} etypes, before the start of the view")
        return base + offset

    def _end_position(self) -> int:
        """The end of the file, in etypes of the view (a partial etype counts as one)."""
        view, size = self._f.view, self.Get_size()
        if size <= view.disp or view.size == 0:
            return 0
        copies, rest = divmod(size - view.disp, view.extent) if view.extent > 0 else (0, size - view.disp)
        runs = view.runs
        within = int(np.clip(rest - runs[:, 0], 0, runs[:, 1]).sum())
        return -(-(copies * view.size + within) // view.esize)

    def Get_byte_offset(self, offset: int) -> int:
        return self._f.view.byte_offset(_etypes(offset, "offset"))

    def Get_type_extent(self, datatype: Datatype) -> int:
        """The extent `datatype` has in the file: its memory extent, as files store bytes natively."""
        return datatype.Get_extent()[1]

    def Get_atomicity(self) -> bool:
        return self._f.atomic

    def Set_atomicity(self, flag: bool) -> None:
        """Collective: in atomic mode each access locks the bytes it touches."""
        f = self._f
        f.atomic = bool(flag)
        f.comm.Barrier()

    atomicity = property(Get_atomicity, Set_atomicity)

    def Sync(self) -> None:
        """Collective: this rank's writes reach the storage device, and every rank's are done."""
        f = self._f
        failure = None
        try:
            os.fsync(f.fd)
        except OSError as error:
            if error.errno not in (errno.EINVAL, errno.EROFS):  # a file that cannot be synced (a device) has nothing to sync
                failure = posix.mpi_error(error, f"syncing {f.path!r}")
        _agree(f.comm, failure, "Sync")

    # ----- moving data: the three kinds of position

    def _spec(self, buf, writing: bool) -> msg.Spec:
        """The buffer's elements, once the file's access mode allows the access (checked before anything moves)."""
        f = self._f
        if writing and f.amode & MODE_RDONLY:
            raise err.Exception(err.ERR_READ_ONLY, f"{f.path!r} was opened MODE_RDONLY")
        if not writing and f.amode & MODE_WRONLY:
            raise err.Exception(err.ERR_ACCESS, f"{f.path!r} was opened MODE_WRONLY")
        return msg.read_spec(buf, "buf", writable=not writing)

    def _access(self, spec: msg.Spec, position: int, writing: bool) -> int:
        """Move the elements to or from the view at `position` (etypes); the bytes moved."""
        f = self._f
        nbytes = spec.array.nbytes
        if nbytes % f.view.esize:
            raise err.Exception(err.ERR_ARG, f"the buffer's {nbytes} bytes are not whole etypes "
                                             f"({f.view.esize} bytes each)")
        runs = f.view.file_runs(position * f.view.esize, nbytes)
        with posix.RangeLock(f.fd if f.atomic else None, runs, writing):
            if writing:
                return posix.write_runs(f.fd, runs, np.ascontiguousarray(spec.array).view(np.uint8).reshape(-1))
            moved = posix.read_runs(f.fd, runs, spec.array)
        spec.store()
        return moved

    def _at(self, offset, buf, status, writing: bool) -> int:
        moved = self._access(self._spec(buf, writing), _nonnegative(offset), writing)
        _status(status, moved)
        return moved

    def _individual(self, buf, status, writing: bool) -> int:
        f = self._f
        moved = self._access(self._spec(buf, writing), f.position, writing)
        f.position += moved // f.view.esize
        _status(status, moved)
        return moved

    def _shared(self, buf, status, writing: bool) -> int:
        """The shared pointer moves on by the etypes the buffer holds."""
        f = self._f
        spec = self._spec(buf, writing)
        moved = self._access(spec, f.shared.advance(spec.array.nbytes // f.view.esize), writing)
        _status(status, moved)
        return moved

    def _ordered(self, buf, status, writing: bool) -> int:
        """Collective: rank r's data goes after ranks 0..r-1's, from the shared pointer on, which moves past all."""
        f = self._f
        spec = self._spec(buf, writing)
        counts = f.comm.allgather(spec.array.nbytes // f.view.esize)
        base = f.shared.advance(sum(counts)) if f.comm.Get_rank() == 0 else None
        base = f.comm.bcast(base, root=0)
        moved = self._access(spec, base + sum(counts[: f.comm.Get_rank()]), writing)
        _status(status, moved)
        return moved

    def _begin(self, name: str, moved: int) -> None:
        f = self._f
        if f.split is not None:
            raise err.Exception(err.ERR_OTHER, f"{name}_begin while {f.split[0]}_begin has not ended")
        f.split = (name, moved)

    def _end(self, name: str, status) -> None:
        f = self._f
        if f.split is None or f.split[0] != name:
            raise err.Exception(err.ERR_OTHER, f"{name}_end without {name}_begin")
        _status(status, f.split[1])
        f.split = None

    # explicit offsets
    def Read_at(self, offset, buf, status=None) -> None:
        self._at(offset, buf, status, False)

    def Write_at(self, offset, buf, status=None) -> None:
        self._at(offset, buf, status, True)

    def Iread_at(self, offset, buf) -> Request:
        return _done(self._at(offset, buf, None, False))

    def Iwrite_at(self, offset, buf) -> Request:
        return _done(self._at(offset, buf, None, True))

    Read_at_all, Write_at_all, Iread_at_all, Iwrite_at_all = Read_at, Write_at, Iread_at, Iwrite_at

    def Read_at_all_begin(self, offset, buf) -> None:
        self._begin("Read_at_all", self._at(offset, buf, None, False))

    def Read_at_all_end(self, buf, status=None) -> None:
        self._end("Read_at_all", status)

    def Write_at_all_begin(self, offset, buf) -> None:
        self._begin("Write_at_all", self._at(offset, buf, None, True))

    def Write_at_all_end(self, buf, status=None) -> None:
        self._end("Write_at_all", status)

    # individual file pointer
    def Read(self, buf, status=None) -> None:
        self._individual(buf, status, False)

    def Write(self, buf, status=None) -> None:
        self._individual(buf, status, True)

    def Iread(self, buf) -> Request:
        return _done(self._individual(buf, None, False))

    def Iwrite(self, buf) -> Request:
        return _done(self._individual(buf, None, True))

    Read_all, Write_all, Iread_all, Iwrite_all = Read, Write, Iread, Iwrite

    def Read_all_begin(self, buf) -> None:
        self._begin("Read_all", self._individual(buf, None, False))

    def Read_all_end(self, buf, status=None) -> None:
        self._end("Read_all", status)

    def Write_all_begin(self, buf) -> None:
        self._begin("Write_all", self._individual(buf, None, True))

    def Write_all_end(self, buf, status=None) -> None:
        self._end("Write_all", status)

    # shared file pointer
    def Read_shared(self, buf, status=None) -> None:
        self._shared(buf, status, False)

    def Write_shared(self, buf, status=None) -> None:
        self._shared(buf, status, True)

    def Iread_shared(self, buf) -> Request:
        return _done(self._shared(buf, None, False))

    def Iwrite_shared(self, buf) -> Request:
        return _done(self._shared(buf, None, True))

    def Read_ordered(self, buf, status=None) -> None:
        self._ordered(buf, status, False)

    def Write_ordered(self, buf, status=None) -> None:
        self._ordered(buf, status, True)

    def Read_ordered_begin(self, buf) -> None:
        self._begin("Read_ordered", self._ordered(buf, None, False))

    def Read_ordered_end(self, buf, status=None) -> None:
        self._end("Read_ordered", status)

    def Write_ordered_begin(self, buf) -> None:
        self._begin("Write_ordered", self._ordered(buf, None, True))

    def Write_ordered_end(self, buf, status=None) -> None:
        self._end("Write_ordered", status)


def _done(moved: int) -> Request:
    return Request._naming(_Done(moved))


def _nonnegative(offset) -> int:
    offset = _etypes(offset, "offset")
    if offset < 0:
        raise err.Exception(err.ERR_ARG, f"offset must be >= 0, got {offset}")
    return offset


def _checked_amode(amode: int) -> int:
    amode = _etypes(amode, "amode")
    access = [bit for bit in (MODE_RDONLY, MODE_WRONLY, MODE_RDWR) if amode & bit]
    if len(access) != 1:
        raise err.Exception(err.ERR_AMODE, "amode needs exactly one of MODE_RDONLY, MODE_WRONLY and MODE_RDWR")
    if amode & MODE_RDONLY and amode & (MODE_CREATE | MODE_EXCL):
        raise err.Exception(err.ERR_AMODE, "MODE_RDONLY cannot go with MODE_CREATE or MODE_EXCL")
    if amode & MODE_RDWR and amode & MODE_SEQUENTIAL:
        raise err.Exception(err.ERR_AMODE, "MODE_RDWR cannot go with MODE_SEQUENTIAL")
    return amode


def _flags(amode: int) -> int:
    flags = {MODE_RDONLY: os.O_RDONLY, MODE_WRONLY: os.O_WRONLY, MODE_RDWR: os.O_RDWR}[
        amode & (MODE_RDONLY | MODE_WRONLY | MODE_RDWR)]
    if amode & MODE_CREATE:
        flags |= os.O_CREAT
    if amode & MODE_EXCL:
        flags |= os.O_EXCL
    return flags | getattr(os, "O_CLOEXEC", 0)


class _NullFile:
    """Where FILE_NULL's error handler is kept: the one new files start with."""


_NULL_FILE = _NullFile()
FILE_NULL = File._naming(None, constant=True)
handlers.install(File, "file", lambda file: file._ref if file._ref is not None else _NULL_FILE)
