from lmcflow.jobs.figures import run_lmc_vs_k_figure
from lmcflow.logs import job_log

with job_log(snakemake.log[0]):
    run_lmc_vs_k_figure(snakemake.input.interpolation, snakemake.input.summary, dict(snakemake.output.items()))
