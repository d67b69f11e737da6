from lmcflow.logs import job_log
from lmcflow.report_jobs import run_lmc_vs_k_figure

with job_log(snakemake.log[0]):
    run_lmc_vs_k_figure(snakemake.input.interpolation, snakemake.input.summary, dict(snakemake.output.items()))
