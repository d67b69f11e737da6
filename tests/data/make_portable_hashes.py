"""Remake tests/data/portable_hashes.json: the hashes of tests/configs/portable.yaml's outputs in
portable mode (tests/test_portable_bits.py), with the torch, MKL and oneDNN builds that made them.

Only when the pinned torch changes, or the config or the science does on purpose; the point of the
file is that another machine's run must give exactly these hashes. One record per CPU vendor (MKL picks its
kernels by vendor): the script writes this machine's vendor and keeps the others while the builds are unchanged.

    PYTHONPATH=. .venv/bin/python tests/data/make_portable_hashes.py

``--mode vendor_neutral`` remakes tests/data/vendor_neutral_hashes.json instead: one record for every vendor,
naming the vendors it was made or checked on (``made_on``); a run on another vendor that gives the same hashes
adds that vendor, one that gives others fails loudly.
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.test_portable_bits import (  # noqa: E402
    ALL_TARGETS,
    HASHES,
    NEUTRAL,
    NEUTRAL_HASHES,
    build_facts,
    hashes,
    run_workflow,
)


def vendor_neutral() -> None:
    """The vendor_neutral record: made here, or confirmed here and this vendor added to ``made_on``."""
    from lmcflow.kernels import cpu_info

    info = cpu_info()
    with tempfile.TemporaryDirectory() as tmp:
        run_workflow(Path(tmp), ALL_TARGETS, {}, *NEUTRAL)
        got = hashes(Path(tmp))
    old = json.loads(NEUTRAL_HASHES.read_text()) if NEUTRAL_HASHES.is_file() else {}
    made_on = old.get("made_on", []) if old.get("build") == build_facts() else []
    if made_on and old["hashes"] != got:
        differ = sorted(f for f in got if old["hashes"].get(f) != got[f])
        raise SystemExit(f"vendor_neutral bits on {info['vendor']} ({info['model']}) differ from the record made on "
                         f"{made_on} in {differ}: the mode is not vendor-neutral here")
    entry = f"{info['vendor']}: {info['model']} ({', '.join(info['simd'])})"
    record = {"config": "tests/configs/portable.yaml", "mode": "vendor_neutral", "build": build_facts(),
              "made_on": sorted({*made_on, entry}), "hashes": got}
    tmp_out = NEUTRAL_HASHES.with_suffix(".tmp")
    tmp_out.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    tmp_out.replace(NEUTRAL_HASHES)
    print(f"{NEUTRAL_HASHES}: {len(got)} hashes, made on {record['made_on']}")


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
    vendor_neutral() if sys.argv[1:] == ["--mode", "vendor_neutral"] else main()
