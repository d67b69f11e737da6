"""lmcflow.logs.job_log: records, tracebacks and the start-up / finish lines that benchmarks/startup_share.py sums."""
import importlib.util
import logging
from pathlib import Path

import pytest

from lmcflow.logs import job_log

REPO = Path(__file__).resolve().parents[1]


def startup_share():
    spec = importlib.util.spec_from_file_location("startup_share", REPO / "benchmarks/startup_share.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_job_log_writes_records_and_cpu_lines(tmp_path):
    path = tmp_path / "logs/train/s/p/bundle-0.log"
    with job_log(str(path)):
        logging.getLogger("lmcflow.jobs").info("[train] hello")
        print("third-party output")
    text = path.read_text()
    assert "INFO lmcflow.jobs: [train] hello" in text and "third-party output" in text
    lines = text.splitlines()
    assert "[job] start-up:" in lines[0] and "[job] finished:" in lines[-1]
    [(rule, start, total)] = startup_share().job_times(tmp_path / "logs")
    assert rule == "train" and 0 < start <= total


def test_job_log_records_the_traceback_and_no_finish_line(tmp_path):
    path = tmp_path / "logs/merge/x.log"
    with pytest.raises(ZeroDivisionError), job_log(str(path)):
        raise ZeroDivisionError
    text = path.read_text()
    assert "job failed" in text and "ZeroDivisionError" in text and "[job] finished" not in text
    assert startup_share().job_times(tmp_path / "logs") == []  # a failed job is not counted


def test_startup_share_summary_line(tmp_path, capsys):
    for rule, start, total in (("train", 3.0, 30.0), ("claim", 1.0, 2.0)):
        (tmp_path / rule).mkdir()
        (tmp_path / rule / "j.log").write_text(f"t INFO lmcflow.job: [job] start-up: {start} CPU-s before\n"
                                               f"t INFO lmcflow.job: [job] finished: {total} CPU-s in all, 1 s\n")
    assert startup_share().main([str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("startup_share=0.125 jobs=2")


@pytest.mark.parametrize("fails", [False, True])
def test_a_snakemake_script_job_ends_without_teardown_only_when_it_succeeded(tmp_path, fails):
    """In a ``script:`` job (``snakemake`` defined in ``__main__``) a successful job_log ends the process right after
    the log is closed, with status 0: code after it (an atexit hook here) never runs. A failed job raises as usual."""
    import os
    import subprocess
    import sys
    import textwrap

    log, marker = tmp_path / "job.log", tmp_path / "teardown-ran"
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(f"""
        import atexit, logging, pathlib
        from lmcflow.logs import job_log
        snakemake = object()  # what Snakemake's script preamble defines
        atexit.register(lambda: pathlib.Path({str(marker)!r}).write_text("x"))
        with job_log({str(log)!r}):
            logging.getLogger("lmcflow.jobs").info("[train] done")
            if {fails}:
                raise ValueError("diverged")
        pathlib.Path({str(marker)!r}).write_text("after the with block")
    """))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    res = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    text = log.read_text()
    if fails:
        assert res.returncode != 0 and "ValueError: diverged" in text and "[job] finished" not in text
        assert marker.read_text() == "x"  # the interpreter tore down as usual
    else:
        assert res.returncode == 0, res.stderr
        assert "[train] done" in text and text.splitlines()[-1].split(" ", 3)[3].startswith("[job] finished")
        assert not marker.exists()
