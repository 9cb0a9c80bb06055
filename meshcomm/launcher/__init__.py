"""Starting a job's ranks on one host: environment, supervision, output, failure handling."""

from meshcomm.launcher.env import JobLayout, child_environ, rank_variables, resolve_token
from meshcomm.launcher.job import (
    kill_grace,
    launch,
    make_layout,
    python_module_command,
    python_script_command,
    rank_specs,
    run_job,
)
from meshcomm.launcher.ports import free_port
from meshcomm.launcher.process import JobResult, RankFailure, RankSpec, Supervisor

__all__ = [
    "JobLayout",
    "JobResult",
    "RankFailure",
    "RankSpec",
    "Supervisor",
    "child_environ",
    "free_port",
    "kill_grace",
    "launch",
    "make_layout",
    "python_module_command",
    "python_script_command",
    "rank_specs",
    "rank_variables",
    "resolve_token",
    "run_job",
]
