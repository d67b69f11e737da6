from lmcflow.logs import job_log
from lmcflow.report_jobs import run_coherence_figures

with job_log(snakemake.log[0]):
    run_coherence_figures(snakemake.input[0], dict(snakemake.output.items()))
