from lmcflow.logs import job_log
from lmcflow.report_jobs import run_barriers

with job_log(snakemake.log[0]):
    run_barriers(snakemake.input[0], snakemake.output[0])
