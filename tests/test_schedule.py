"""The test schedule of tests/conftest.py names what exists: a renamed or deleted file in HEAVY_FIRST or SHARED_RUNS
would silently fall back to file order (a heavy file sent last, one worker idle while the other finishes it)."""
from pathlib import Path

from tests.conftest import HEAVY_FIRST, SHARED_RUNS, work_unit

REPO = Path(__file__).resolve().parents[1]


def test_every_scheduled_unit_is_a_test_file_or_a_shared_run():
    assert all((REPO / path).is_file() for path in SHARED_RUNS)
    for unit in HEAVY_FIRST:
        assert unit in SHARED_RUNS.values() or (REPO / unit).is_file() and unit not in SHARED_RUNS, unit
    assert len(set(HEAVY_FIRST)) == len(HEAVY_FIRST)


def test_files_of_a_shared_run_are_one_unit():
    assert work_unit("tests/test_recovery.py::test_x") == work_unit("tests/test_compare.py::test_y") == "small_run"
    assert work_unit("tests/test_spec_sweep_heavy.py::test_x[vgg11]") == "tests/test_spec_sweep_heavy.py"
