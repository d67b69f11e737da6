"""Every classification builder of torchvision.models: derived and proven, or refused (lmcflow's message), with
its coverage (permuted hidden axes, ``lmcflow.alignment.coverage``), the proof's float64 residual and the seconds
to derive and prove (random init, num_classes 10, a batch of 2 at the smallest input each builder takes; one
thread).

    PYTHONPATH=. .venv/bin/python benchmarks/bench_spec_sweep.py [--write-doc] [--cpu-seconds] [names...]
    PYTHONPATH=. .venv/bin/python benchmarks/bench_spec_sweep.py --structure


``--write-doc`` writes the table into docs/spec-sweep.md between its markers; with names, only their rows are
replaced (the other builders keep the rows the doc has). ``--cpu-seconds``: the rows give the process's CPU
seconds, marked "CPU", instead of wall seconds (a sweep that shares the machine with higher-priority work).
``--structure`` records what each builder is built of (``structure_of``, about a minute, no proof) in
tests/data/spec_sweep_structure.json, from which CI picks the heavy builders it sweeps (``swept_in_ci``): record it
again when torchvision changes. tests/test_spec_sweep.py and tests/test_spec_sweep_heavy.py run the same
``sweep_one`` (tests/spec_sweep.py), the first on every builder up to 12 M parameters, the second on the smallest
heavier builder of each structure (all of them with ``LMCFLOW_FULL_SPEC_SWEEP=1``); this script sweeps them all.
"""
from __future__ import annotations

import argparse
import json
import resource
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.spec_sweep

from tests.spec_sweep import DOC, STRUCTURE, builders, measured_structure, sweep_one, table  # noqa: E402

BEGIN, END = "<!-- spec-sweep:begin -->", "<!-- spec-sweep:end -->"


def merged(text: str, doc: str, ran: set) -> str:
    """``text`` (``table``'s) with each builder not in ``ran`` given its row from ``doc``, where it has one."""
    old = {}
    for line in doc.split(BEGIN)[1].split(END)[0].splitlines():
        if line.startswith("| `"):
            old[line.split("`")[1]] = line
    return "\n".join(old.get(line.split("`")[1], line) if line.startswith("| `") and line.split("`")[1] not in ran
                     else line for line in text.splitlines())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("names", nargs="*")
    ap.add_argument("--write-doc", action="store_true")
    ap.add_argument("--cpu-seconds", action="store_true")
    ap.add_argument("--structure", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.structure:
        STRUCTURE.write_text(json.dumps(measured_structure(builders()), indent=1, sort_keys=True) + "\n")
        print(f"wrote {STRUCTURE}")
        return
    rows = []
    for name in args.names or builders():
        try:
            rows.append(sweep_one(name))
        except Exception as err:  # a crash is a bug: reported here, failed by tests/test_spec_sweep.py
            rows.append({"name": name, "status": "CRASH", "coverage": None, "residual": None, "groups": 0,
                         "seconds": 0.0, "cpu_seconds": 0.0, "message": f"{type(err).__name__}: {err}", "params": 0,
                         "input": (0, 0), "structure": []})
        r = rows[-1]
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux; the process's peak so far
        print(f"{name}: {r['status']} {r['seconds']:.2f}s ({r['cpu_seconds']:.2f} CPU-s), peak RSS so far "
              f"{peak:.2f} GiB", flush=True)
    text = table(rows, args.cpu_seconds)
    print(text)
    if args.write_doc:
        doc = DOC.read_text()
        text = merged(text, doc, {r["name"] for r in rows})
        head, rest = doc.split(BEGIN)
        DOC.write_text(f"{head}{BEGIN}\n{text}\n{END}{rest.split(END)[1]}")


if __name__ == "__main__":
    main()
