from lmcflow.logs import job_log
from lmcflow.report_jobs import run_provenance

with job_log(snakemake.log[0]):
    run_provenance(snakemake.input.runs, snakemake.output.json, snakemake.output.html, snakemake.params.threads)
