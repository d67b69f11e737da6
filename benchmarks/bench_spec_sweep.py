"""Every classification builder of torchvision.models: derived and proven, or refused (lmcflow's message), with
its coverage (permuted hidden axes, ``lmcflow.alignment.coverage``), the proof's float64 residual and the seconds
to derive and prove (random init, num_classes 10, a batch of 2 at the smallest input each builder takes; one
thread).

    PYTHONPATH=. .venv/bin/python benchmarks/bench_spec_sweep.py [--write-doc] [names...]

``--write-doc`` writes the table into docs/spec-sweep.md between its markers. tests/test_spec_sweep.py runs the
same ``sweep_one`` (tests/spec_sweep.py) on every builder, the heavy ones under the ``slow`` marker.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.spec_sweep

from tests.spec_sweep import DOC, builders, sweep_one, table  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("names", nargs="*")
    ap.add_argument("--write-doc", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows = []
    for name in args.names or builders():
        try:
            rows.append(sweep_one(name))
        except Exception as err:  # a crash is a bug: reported here, failed by tests/test_spec_sweep.py
            rows.append({"name": name, "status": "CRASH", "coverage": None, "residual": None, "groups": 0,
                         "seconds": 0.0, "message": f"{type(err).__name__}: {err}", "params": 0, "input": (0, 0)})
        r = rows[-1]
        print(f"{name}: {r['status']} {r['seconds']:.2f}s", flush=True)
    text = table(rows)
    print(text)
    if args.write_doc:
        doc = DOC.read_text()
        begin, end = "<!-- spec-sweep:begin -->", "<!-- spec-sweep:end -->"
        head, rest = doc.split(begin)
        DOC.write_text(f"{head}{begin}\n{text}\n{end}{rest.split(end)[1]}")


if __name__ == "__main__":
    main()
