"""In-process tests that use COMM_SELF or COMM_WORLD join this pytest process to a job of one: leave it after each."""

from __future__ import annotations

import pytest

from meshcomm.api import state


@pytest.fixture(autouse=True)
def _leave_the_job_the_test_joined():
    joined_before = state.is_initialized()
    yield
    if not joined_before and state.is_initialized():
        from meshcomm.mpi import world

        world.finalize()
        # Later tests (other folders included) may join a job again, as a fresh process could.
        world._finalized = False
        world._self_group = None
