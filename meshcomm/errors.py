"""The MeshcommError family: runtime failures, each naming where it happened.

Bad arguments raise the built-in ValueError/TypeError instead; these are for
what goes wrong while ranks talk.
"""

from __future__ import annotations


class MeshcommError(RuntimeError):
    """Base of every runtime failure raised by meshcomm."""


class CommTimeoutError(MeshcommError, TimeoutError):
    """A blocking operation passed its deadline; the message names who never arrived."""


class PeerLostError(MeshcommError, ConnectionError):
    """A peer's connection closed or its process died while we needed it."""

    def __init__(self, message: str, peer: int | None = None) -> None:
        super().__init__(message)
        self.peer = peer


class CollectiveMismatchError(MeshcommError):
    """Two ranks called different collectives (or sizes, dtypes, roots) at the same point."""


class MessageSizeError(MeshcommError):
    """A message's byte count differs from the buffer posted to receive it."""


class RendezvousError(MeshcommError):
    """The job could not assemble: a store unreachable or ranks missing."""


class AuthenticationError(MeshcommError):
    """A connection did not prove it holds the job's token."""


class AbortedError(MeshcommError):
    """The operation was cancelled by abort() or by a failure elsewhere in the group."""


class RevokedError(AbortedError):
    """The group was revoked (by a member's revoke(), or replaced by shrink()): its calls raise at once."""
