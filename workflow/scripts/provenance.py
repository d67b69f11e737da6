from lmcflow.jobs.report import run_provenance
from lmcflow.logs import job_log

with job_log(snakemake.log[0]):
    run_provenance(snakemake.input.runs, snakemake.output.json, snakemake.output.html, snakemake.params.imported)
