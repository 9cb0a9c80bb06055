"""What this folder's MPI programs share (each imports it by name: a script's own folder is on its path)."""

from meshcomm import MPI


def raises(error_class, call, *args, **kwargs) -> str:
    """Call `call(*args, **kwargs)`; it must raise MPI.Exception of `error_class`. Returns the error's text."""
    try:
        call(*args, **kwargs)
    except MPI.Exception as exc:
        assert exc.Get_error_class() == error_class, (error_class, exc)
        return str(exc)
    raise AssertionError(f"{call} accepted {args} {kwargs}")
