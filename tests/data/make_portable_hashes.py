"""Remake tests/data/portable_hashes.json: the hashes of tests/configs/portable.yaml's outputs in
portable mode (tests/test_portable_bits.py), with the torch, MKL and oneDNN builds that made them.

Only when the pinned torch changes, or the config or the science does on purpose; the point of the
file is that another machine's run must give exactly these hashes.

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
    with tempfile.TemporaryDirectory() as tmp:
        run_workflow(Path(tmp), ALL_TARGETS, {})
        record = {"config": "tests/configs/portable.yaml", "build": build_facts(), "hashes": hashes(Path(tmp))}
    tmp_out = HASHES.with_suffix(".tmp")
    tmp_out.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    tmp_out.replace(HASHES)
    print(f"{HASHES}: {len(record['hashes'])} hashes, {record['build']}")


if __name__ == "__main__":
    main()
