from lmcflow.logs import job_log
from lmcflow.report_jobs import run_claims_table

with job_log(snakemake.log[0]):
    run_claims_table(list(snakemake.input), snakemake.output[0])
