"""Remake tests/data/portable_hashes.json: the hashes of tests/configs/portable.yaml's outputs in
portable mode (tests/test_portable_bits.py), with the torch, MKL and oneDNN builds that made them.

Only when the pinned torch changes, or the config or the science does on purpose; the point of the
file is that another machine's run must give exactly these hashes. One record per CPU vendor (MKL picks its
kernels by vendor): the script writes this machine's vendor and keeps the others while the builds are unchanged.

    PYTHONPATH=. .venv/bin/python tests/data/make_portable_hashes.py
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.test_portable_bits import ALL_TARGETS, HASHES, build_facts, hashes, run_workflow  # noqa: E402


def main() -> None:
    """This CPU vendor's record; the other vendors' records are kept while the library builds are unchanged."""
    from lmcflow.kernels import cpu_info

    vendor = cpu_info()["vendor"]
    with tempfile.TemporaryDirectory() as tmp:
        run_workflow(Path(tmp), ALL_TARGETS, {})
        got = hashes(Path(tmp))
    old = json.loads(HASHES.read_text()) if HASHES.is_file() else {}
    by_vendor = old.get("hashes_by_vendor", {}) if old.get("build") == build_facts() else {}
    record = {"config": "tests/configs/portable.yaml", "build": build_facts(),
              "hashes_by_vendor": {**by_vendor, vendor: got}}
    tmp_out = HASHES.with_suffix(".tmp")
    tmp_out.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    tmp_out.replace(HASHES)
    print(f"{HASHES}: {len(got)} hashes for {vendor}, {record['build']}")


if __name__ == "__main__":
    main()
