"""Job logging: the standard ``logging`` module writing to each rule's ``log:`` file.

Library modules log through ``logging.getLogger(__name__)`` and never print; a Snakemake
``script:`` wraps its call in ``job_log(snakemake.log[0])``, which sends every lmcflow record,
warnings and any uncaught traceback (stdout/stderr too, for third-party output) to that file.
Outside a job (tests, notebooks) records go wherever the caller's logging configuration says.
"""
from __future__ import annotations

import contextlib
import logging
import os
import resource
import sys
import time
from pathlib import Path

import lmcflow

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# The first and last line of every job log: CPU seconds before the job's own work began (interpreter,
# Snakemake's script preamble, imports) and in all. benchmarks/startup_share.py sums them over a run.
STARTUP_LINE = "[job] start-up: {cpu:.3f} CPU-s before the job's work (interpreter, imports)"
# Which lmcflow the job imported: the checkout that runs the workflow (common.smk puts it first on PYTHONPATH).
PACKAGE_LINE = "[job] lmcflow {version} from {path}"
DONE_LINE = "[job] finished: {cpu:.3f} CPU-s in all, {wall:.2f} s wall since start-up"


def cpu_seconds() -> float:
    """User + system CPU time of this process so far."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def in_snakemake_script() -> bool:
    """Whether this process is a Snakemake ``script:`` job (its preamble defines ``snakemake`` in ``__main__``)."""
    return hasattr(sys.modules.get("__main__"), "snakemake")


@contextlib.contextmanager
def job_log(path: str | None, level: int = logging.INFO):
    """Route logging (and stdout/stderr) of one job to ``path``; re-raise errors after logging them.

    In a Snakemake ``script:`` job that succeeded, the process ends right after the log is closed, without the
    interpreter's teardown: its outputs are written and closed, and the teardown of a process that imported torch
    costs ~1.1 CPU-s (measured: 1.08 s for ``import torch`` alone), about 100 CPU-s over the default run's 91
    torch jobs. A failed job raises as usual."""
    if not path:
        yield
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", buffering=1) as fh:
        handler = logging.StreamHandler(fh)
        handler.setFormatter(logging.Formatter(FORMAT, datefmt="%H:%M:%S"))
        root = logging.getLogger()
        old_level = root.level
        root.addHandler(handler)
        root.setLevel(level)
        logging.captureWarnings(True)
        old_streams = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = fh
        job = logging.getLogger("lmcflow.job")
        job.info(STARTUP_LINE.format(cpu=cpu_seconds()))
        job.info(PACKAGE_LINE.format(version=lmcflow.__version__, path=Path(lmcflow.__file__).parent))
        t0 = time.perf_counter()
        try:
            yield
            job.info(DONE_LINE.format(cpu=cpu_seconds(), wall=time.perf_counter() - t0))
        except BaseException:
            logging.getLogger("lmcflow").exception("job failed")
            raise
        finally:
            sys.stdout, sys.stderr = old_streams
            logging.captureWarnings(False)
            root.removeHandler(handler)
            root.setLevel(old_level)
    if in_snakemake_script():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
