"""MPI.Info: string keys and values handed to MPI calls as hints, with the mapping interface mpi4py gives it.

INFO_NULL is the null handle: it reads as an empty mapping and refuses
writes with KeyError (mapping calls) or ERR_INFO (MPI calls). INFO_ENV
describes how this process was started.
"""

from __future__ import annotations

import os
import platform
import socket
import sys

from meshcomm.mpi import exceptions as err
from meshcomm.mpi.handles import Handle, Referent

MAX_INFO_KEY = 255
MAX_INFO_VAL = 1024


class _Store(Referent):
    def __init__(self, items: dict[str, str], number: int | None = None, name: str = "") -> None:
        super().__init__(number, name)
        self.items = items


class Info(Handle):
    """Key-value hints; INFO_NULL when it has none."""

    _null_name = "INFO_NULL"

    @property
    def _items(self) -> dict[str, str]:
        if self._ref is None:
            raise err.Exception(err.ERR_INFO, "this is INFO_NULL (or a freed info)")
        return self._ref.items

    @classmethod
    def Create(cls, items=None) -> "Info":
        """A new info object, filled from a mapping or a sequence of (key, value) pairs."""
        info = cls._naming(_Store({}))
        if items is not None:
            pairs = items.items() if hasattr(items, "items") else items
            try:
                pairs = list(pairs)
            except TypeError:
                raise TypeError(f"items must be a mapping or a sequence of (key, value) pairs, "
                                f"got {type(items).__name__}") from None
            for key, value in pairs:
                info.Set(key, value)
        return info

    @classmethod
    def Create_env(cls, args=None) -> "Info":
        """A new info object describing this process's start, as INFO_ENV does; `args` replaces the command line."""
        if args is not None and not isinstance(args, (str, list, tuple)):
            raise TypeError(f"args must be a str or a sequence of str, got {type(args).__name__}")
        items = _environment()
        if args is not None:
            words = [args] if isinstance(args, str) else [str(a) for a in args]
            items.pop("command", None)
            items.pop("argv", None)
            if words:
                items["command"] = words[0]
                if words[1:]:
                    items["argv"] = " ".join(words[1:])
        return cls._naming(_Store(items))

    def Free(self) -> None:
        if self._ref is not None and self._ref.predefined:
            raise err.Exception(err.ERR_INFO, f"cannot free the predefined {self._ref.name}")
        self._items  # raises for INFO_NULL
        self._forget()

    def Dup(self) -> "Info":
        return type(self)._naming(_Store(dict(self._items)))

    def Get(self, key: str) -> str | None:
        """The value of `key`, or None when the key is not set."""
        return self._items.get(_key(key))

    def Set(self, key: str, value: str) -> None:
        items = self._items
        if self._ref.predefined:
            raise err.Exception(err.ERR_INFO, f"the predefined {self._ref.name} cannot be changed")
        if not isinstance(value, str):
            raise TypeError(f"info value must be a str, got {type(value).__name__}")
        if len(value) > MAX_INFO_VAL:
            raise err.Exception(err.ERR_INFO_VALUE, f"info value is longer than MAX_INFO_VAL={MAX_INFO_VAL}")
        items[_key(key)] = value

    def Delete(self, key: str) -> None:
        items = self._items
        if self._ref.predefined:
            raise err.Exception(err.ERR_INFO, f"the predefined {self._ref.name} cannot be changed")
        key = _key(key)
        if key not in items:
            raise err.Exception(err.ERR_INFO_NOKEY, f"info key {key!r} is not set")
        del items[key]

    def Get_nkeys(self) -> int:
        return len(self._items)

    def Get_nthkey(self, n: int) -> str:
        keys = list(self._items)
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"n must be an int, got {type(n).__name__}")
        if not 0 <= n < len(keys):
            raise err.Exception(err.ERR_INFO_KEY, f"n must be in [0, {len(keys)}), got {n}")
        return keys[n]

    # ----- the mapping interface: INFO_NULL reads as empty and refuses writes with KeyError

    def _mapping(self, key=None) -> dict[str, str]:
        if self._ref is None:
            raise KeyError(key if key is not None else "INFO_NULL holds no keys")
        return self._items

    def __len__(self) -> int:
        return 0 if self._ref is None else len(self._ref.items)

    def __contains__(self, key) -> bool:
        return self._ref is not None and key in self._ref.items

    def __iter__(self):
        return iter(self.keys())

    def __getitem__(self, key: str) -> str:
        value = self._mapping(key).get(_key(key))
        if value is None:
            raise KeyError(key)
        return value

    def __setitem__(self, key: str, value: str) -> None:
        self._mapping(key)
        self.Set(key, value)

    def __delitem__(self, key: str) -> None:
        if key not in self._mapping(key):
            raise KeyError(key)
        self.Delete(key)

    def get(self, key: str, default=None):
        return default if self._ref is None else self._items.get(_key(key), default)

    def keys(self) -> list[str]:
        return [] if self._ref is None else list(self._ref.items)

    def values(self) -> list[str]:
        return [] if self._ref is None else list(self._ref.items.values())

    def items(self) -> list[tuple[str, str]]:
        return [] if self._ref is None else list(self._ref.items.items())

    def update(self, other=(), **kwargs) -> None:
        self._mapping()
        pairs = other.items() if hasattr(other, "items") else other
        for key, value in [*pairs, *kwargs.items()]:
            self.Set(key, value)

    def pop(self, key: str, *default):
        if self._ref is None or key not in self._ref.items:
            if default:
                return default[0]
            raise KeyError(key)
        value = self._items[key]
        self.Delete(key)
        return value

    def popitem(self) -> tuple[str, str]:
        items = self._mapping()
        if not items:
            raise KeyError("popitem(): info is empty")
        key = next(reversed(items))
        value = items[key]
        self.Delete(key)
        return key, value

    def copy(self) -> "Info":
        return type(self)() if self._ref is None else self.Dup()

    def clear(self) -> None:
        if self._ref is not None:
            for key in list(self._items):
                self.Delete(key)

    def _rebuild_args(self) -> tuple:
        return (self.items(),)

    @classmethod
    def _rebuild(cls, items) -> "Info":
        return cls.Create(items)


def _key(key) -> str:
    if not isinstance(key, str):
        raise TypeError(f"info key must be a str, got {type(key).__name__}")
    if not key or len(key) > MAX_INFO_KEY:
        raise err.Exception(err.ERR_INFO_KEY, f"info key must have 1 to MAX_INFO_KEY={MAX_INFO_KEY} characters, "
                                              f"got {len(key)}")
    return key


def _environment() -> dict[str, str]:
    """The keys MPI defines for INFO_ENV that this process can answer."""
    argv = list(sys.argv)
    items = {"command": sys.executable, "argv": " ".join([a for a in argv if a])}
    items.update(host=socket.gethostname(), arch=platform.machine(), wdir=os.getcwd(),
                 thread_level="MPI_THREAD_SERIALIZED")
    return {key: value for key, value in items.items() if value}


INFO_NULL = Info._naming(None, constant=True)
INFO_ENV = Info._naming(_Store(_environment(), number=1, name="INFO_ENV"), constant=True)
