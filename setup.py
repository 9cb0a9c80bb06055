"""Builds meshcomm's compiled hot path (meshcomm/native/*.c) when a C compiler is there.

Everything else is in pyproject.toml. Without a compiler the build goes on without the
extension, and meshcomm runs its pure-Python path (docs/native.md).
"""

import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """Says which path the install gives, in one line, whether the compiler is there or not."""

    def run(self):
        try:
            super().run()
        except Exception as exc:  # no compiler at all: setuptools fails before trying the extension
            print(f"meshcomm: the compiled hot path was not built ({exc}); the pure-Python path will run",
                  file=sys.stderr)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:
            print(f"meshcomm: the compiled hot path was not built ({exc}); the pure-Python path will run",
                  file=sys.stderr)
        else:
            print("meshcomm: built the compiled hot path (meshcomm.native._core)", file=sys.stderr)


native = Extension(
    "meshcomm.native._core",
    sources=["meshcomm/native/_core.c", "meshcomm/native/blocks.c", "meshcomm/native/rings.c",
             "meshcomm/native/group_calls.c", "meshcomm/native/fronts.c", "meshcomm/native/records.c"],
    depends=["meshcomm/native/common.h", "meshcomm/native/arrays.h", "meshcomm/native/blocks.h",
             "meshcomm/native/rings.h", "meshcomm/native/group_calls.h", "meshcomm/native/fronts.h",
             "meshcomm/native/records.h"],
    # No contraction of a * b + c into one rounding: results stay bit-identical to numpy's.
    # -O3: the reductions' loops are vectorised (the same IEEE operations, element by element).
    extra_compile_args=["-O3", "-ffp-contract=off", "-fno-strict-aliasing"],
    optional=True,
)

setup(ext_modules=[native] if sys.platform.startswith("linux") else [], cmdclass={"build_ext": OptionalBuildExt})
