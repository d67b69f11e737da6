"""Share of a run's job CPU time spent on process start-up, from the job logs.

Every job log begins with lmcflow.logs' start-up line (CPU seconds of the interpreter, Snakemake's script
preamble and the imports before the job's work) and ends with its finish line (CPU seconds in all). The
share is Σ start-up / Σ all over every finished job. The Snakemake scheduler process itself is not a job
and is not counted; neither is the interpreter's teardown, which a successful job skips (``lmcflow.logs.job_log``).

    .venv/bin/python benchmarks/startup_share.py [logs]

Last line: ``startup_share=X jobs=N job_cpu_min=Y startup_cpu_min=Z``.
"""
from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

START = re.compile(r"\[job\] start-up: ([0-9.]+) CPU-s")
DONE = re.compile(r"\[job\] finished: ([0-9.]+) CPU-s in all")


def job_times(log_dir: Path) -> list[tuple[str, float, float]]:
    """(rule, start-up CPU-s, total CPU-s) of every job whose log holds the last run's finish line."""
    out = []
    for path in sorted(log_dir.rglob("*.log")):
        text = path.read_text(errors="replace")
        starts, dones = START.findall(text), DONE.findall(text)
        if starts and dones:  # logs append: the last start and finish belong to the last run
            rule = path.relative_to(log_dir).parts[0]
            out.append((rule, float(starts[-1]), float(dones[-1])))
    return out


def main(argv=None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    log_dir = Path(args[0] if args else "logs")
    jobs = job_times(log_dir)
    if not jobs:
        print(f"no finished job logs under {log_dir}")
        return 1
    by_rule = defaultdict(lambda: [0, 0.0, 0.0])
    for rule, start, total in jobs:
        by_rule[rule][0] += 1
        by_rule[rule][1] += start
        by_rule[rule][2] += total
    print(f"{'rule':18s} {'jobs':>5s} {'start-up CPU-s':>15s} {'all CPU-s':>10s} {'share':>6s}")
    for rule, (n, start, total) in sorted(by_rule.items(), key=lambda kv: -kv[1][2]):
        print(f"{rule:18s} {n:5d} {start:15.1f} {total:10.1f} {start / total:6.1%}")
    start = sum(s for _, s, _ in jobs)
    total = sum(t for _, _, t in jobs)
    print(f"startup_share={start / total:.3f} jobs={len(jobs)} job_cpu_min={total / 60:.2f} "
          f"startup_cpu_min={start / 60:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
