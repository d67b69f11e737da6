from lmcflow.jobs.report import run_claims_table
from lmcflow.logs import job_log

with job_log(snakemake.log[0]):
    run_claims_table(list(snakemake.input), snakemake.output[0])
