from lmcflow.jobs.report import run_barriers
from lmcflow.logs import job_log

with job_log(snakemake.log[0]):
    run_barriers(snakemake.input[0], snakemake.output[0])
