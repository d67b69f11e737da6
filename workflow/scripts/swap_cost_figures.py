from lmcflow.jobs.figures import run_swap_cost_figures
from lmcflow.logs import job_log

with job_log(snakemake.log[0]):
    run_swap_cost_figures(snakemake.input.summary, snakemake.input.matrix, dict(snakemake.output.items()))
