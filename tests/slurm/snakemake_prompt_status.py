"""snakemake, with the SLURM executor's status checks at most STATUS_CHECK_CAP_S apart (tests/test_slurm.py).

snakemake-executor-plugin-slurm waits 10 s longer before each status check that sees no job finish (1, 11, 21,
31, ... s apart with --slurm-init-seconds-before-status-checks 1, up to 180 s), and a failed job does not count as
finished. The test's SLURM jobs last 15-60 s, so a run saw a job end up to 30 s after it had ended, and the run
whose train jobs the test cancels waited another 31 s after reporting them before it exited (shutting down
waits out the status thread's sleep). With the cap every job's end is seen within seconds; what a check does
(squeue --states=all of the run's jobs, their states, the errors it reports) stays the plugin's own.

Usage: python tests/slurm/snakemake_prompt_status.py SNAKEMAKE-ARGS...
"""
import sys

from snakemake.cli import main
from snakemake_executor_plugin_slurm import Executor

STATUS_CHECK_CAP_S = 2  # one squeue call per 2 s: nothing to the test cluster's slurmctld

# The interval is a property of the executor interface (snakemake_interface_executor_plugins RemoteExecutor) that
# the plugin sets after every check; this keeps its getter and caps what the plugin sets.
_interval = Executor.next_seconds_between_status_checks
Executor.next_seconds_between_status_checks = _interval.setter(
    lambda self, seconds: _interval.fset(self, min(seconds, STATUS_CHECK_CAP_S)))

if __name__ == "__main__":
    sys.exit(main())
