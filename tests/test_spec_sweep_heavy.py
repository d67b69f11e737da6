"""The builders of torchvision.models over 12 M parameters (``heavy``, tests/spec_sweep.py) swept as
tests/test_spec_sweep.py sweeps the others, under the ``slow`` marker: 55 builders, about 5 minutes together on
one core (up to 40 s for ``vit_h_14`` and ``regnet_y_128gf``), a file of their own so that
`pytest -n 2 --dist loadfile` runs them on one worker from the start while the other runs other files
(tests/conftest.py, HEAVY_FIRST). Together the two files sweep every builder."""
import pytest

from tests.spec_sweep import builders, heavy
from tests.test_spec_sweep import check_swept


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in builders() if heavy(n)])
def test_every_heavy_torchvision_classifier_derives_a_proven_spec_or_is_refused(name):
    check_swept(name)
