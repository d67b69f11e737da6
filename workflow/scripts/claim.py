from lmcflow.config import Point
from lmcflow.logs import job_log
from lmcflow.report_jobs import run_claim

with job_log(snakemake.log[0]):
    run_claim(snakemake.params.claim, snakemake.params.claim_cfg, dict(snakemake.input.items()),
              [Point.from_dict(p) for p in snakemake.params.points], snakemake.output[0])
