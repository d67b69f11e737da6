from lmcflow.jobs.figures import run_coherence_figures
from lmcflow.logs import job_log

with job_log(snakemake.log[0]):
    run_coherence_figures(snakemake.input[0], dict(snakemake.output.items()))
