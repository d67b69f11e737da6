from lmcflow.logs import job_log
from lmcflow.report_jobs import run_concat

with job_log(snakemake.log[0]):
    run_concat(list(snakemake.params.files), snakemake.params.kind, snakemake.output[0])
