from lmcflow.config import Point
from lmcflow.report_jobs import job_log, run_claim

with job_log(snakemake.log[0]) as log:
    run_claim(snakemake.params.claim, snakemake.params.claim_cfg, dict(snakemake.input.items()),
              [Point.from_dict(p) for p in snakemake.params.points], snakemake.output[0], log=log)
