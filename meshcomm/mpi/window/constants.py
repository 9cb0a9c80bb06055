"""MPI's names for one-sided communication: window flavours, memory models, assertions, lock types, attributes."""

from __future__ import annotations

WIN_FLAVOR_CREATE, WIN_FLAVOR_ALLOCATE, WIN_FLAVOR_DYNAMIC, WIN_FLAVOR_SHARED = 1, 2, 3, 4
WIN_SEPARATE, WIN_UNIFIED = 1, 2

MODE_NOCHECK, MODE_NOSTORE, MODE_NOPUT, MODE_NOPRECEDE, MODE_NOSUCCEED = 1024, 2048, 4096, 8192, 16384

LOCK_EXCLUSIVE, LOCK_SHARED = 234, 235

# Attribute keys a window answers through Get_attr.
WIN_BASE, WIN_SIZE, WIN_DISP_UNIT, WIN_CREATE_FLAVOR, WIN_MODEL = (
    0x66000001, 0x66000003, 0x66000005, 0x66000007, 0x66000009,
)
