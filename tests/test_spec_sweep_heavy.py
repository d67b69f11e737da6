"""The builders of torchvision.models over 12 M parameters (``heavy``, tests/spec_sweep.py), swept as
tests/test_spec_sweep.py sweeps the others: in CI a stratified sample, the smallest heavy builder of each structure
(``swept_in_ci``: its module classes, a convolution's also by its grouping), 12 of the 55 in about 40 s on one core
where all 55 take 6 minutes (``regnet_y_128gf`` 70 s, ``vit_h_14`` 45 s), since a larger builder of a structure
repeats its blocks at other depths and widths. ``LMCFLOW_FULL_SPEC_SWEEP=1`` sweeps all 55 here;
benchmarks/bench_spec_sweep.py sweeps them all and records docs/spec-sweep.md, which this file checks holds a
result for every builder. A file of its own, so that `pytest -n 2 --dist loadfile` runs it on one worker while the
other runs other files (tests/conftest.py, HEAVY_FIRST)."""
import os

import pytest

from tests.spec_sweep import DOC, builders, heavy, recorded_structure, swept_in_ci
from tests.test_spec_sweep import check_swept

FULL = os.environ.get("LMCFLOW_FULL_SPEC_SWEEP") == "1"


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in builders() if heavy(n) and (FULL or swept_in_ci(n))])
def test_every_heavy_torchvision_classifier_derives_a_proven_spec_or_is_refused(name):
    check_swept(name)


def test_the_sample_covers_every_structure_and_the_full_sweep_every_builder():
    """Every builder has a recorded structure; each heavy one left out of CI shares its structure with a builder CI
    sweeps; and docs/spec-sweep.md (the full sweep) gives every builder a result, none "not run" or crashed."""
    rec = recorded_structure()
    assert sorted(rec) == sorted(builders()), "tests/data/spec_sweep_structure.json is out of step with " \
        "torchvision: run benchmarks/bench_spec_sweep.py --structure"
    swept = {tuple(rec[n]) for n in builders() if swept_in_ci(n)}
    assert {tuple(rec[n]) for n in builders()} == swept
    left = [n for n in builders() if not swept_in_ci(n)]
    assert left and all(heavy(n) for n in left)
    rows = {line.split("`")[1]: line for line in DOC.read_text().splitlines() if line.startswith("| `")}
    assert sorted(rows) == sorted(builders())
    for line in rows.values():
        result = line.split("|")[3].strip()
        assert result == "derived" or result.startswith("refused: "), line
