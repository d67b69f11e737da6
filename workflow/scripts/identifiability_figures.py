from lmcflow.jobs.figures import run_identifiability_figures
from lmcflow.logs import job_log

with job_log(snakemake.log[0]):
    run_identifiability_figures(snakemake.input.matching, snakemake.input.lmc, dict(snakemake.output.items()))
