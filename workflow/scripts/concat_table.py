from lmcflow.jobs.report import run_concat
from lmcflow.logs import job_log

with job_log(snakemake.log[0]):
    run_concat(list(snakemake.params.files), snakemake.params.kind, snakemake.output[0])
