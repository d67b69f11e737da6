from lmcflow.config import Point
from lmcflow.jobs.report import run_claim
from lmcflow.logs import job_log

with job_log(snakemake.log[0]):
    tables = {kind: list(paths) for kind, paths in snakemake.input.items() if kind != "provenance_runs"}
    run_claim(snakemake.params.claim, snakemake.params.claim_cfg, tables,
              [Point.from_dict(p) for p in snakemake.params.points], snakemake.output[0],
              runs_paths=list(snakemake.input.provenance_runs), datasets=snakemake.params.datasets)
