from lmcflow.logs import job_log
from lmcflow.report_jobs import run_identifiability_figures

with job_log(snakemake.log[0]):
    run_identifiability_figures(snakemake.input.matching, snakemake.input.lmc, dict(snakemake.output.items()))
