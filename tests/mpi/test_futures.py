"""MPIPoolExecutor and mpi4py.util.pool's process Pool, whose workers are spawned MPI processes."""

from __future__ import annotations

import pytest

from tests.mpi.programs import run_program


@pytest.mark.timeout(200)
@pytest.mark.parametrize("nranks", [1, 2])
def test_pools_of_spawned_workers_run_tasks_and_report_failures_under_a_launcher(nranks: int) -> None:
    run_program("futures_program.py", nranks, timeout=150)


@pytest.mark.timeout(120)
def test_a_script_that_makes_a_pool_when_imported_gets_told_to_guard_it() -> None:
    run_program("futures_unguarded_program.py", 1, timeout=90)
