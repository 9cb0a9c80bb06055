"""Executor: runs one rank's schedule over a transport, reducing with numpy ufuncs."""
