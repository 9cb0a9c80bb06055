"""MPI's named integer constants, with the values programs compare against."""

from __future__ import annotations

ANY_SOURCE = -1
ANY_TAG = -1
PROC_NULL = -2
ROOT = -3
UNDEFINED = -32766
TAG_UB = 2**31 - 1

IDENT, CONGRUENT, SIMILAR, UNEQUAL = 0, 1, 2, 3

THREAD_SINGLE, THREAD_FUNNELED, THREAD_SERIALIZED, THREAD_MULTIPLE = 0, 1, 2, 3

# Buffered sends go out eagerly, so an attached buffer needs no room for bookkeeping.
BSEND_OVERHEAD = 0

VERSION, SUBVERSION = 3, 1
MAX_PROCESSOR_NAME = 256
MAX_ERROR_STRING = 512
KEYVAL_INVALID = -1
APPNUM = KEYVAL_INVALID
