from lmcflow.jobs.identifiability import run_swap_costs_group
from lmcflow.kernels import start_job
from lmcflow.logs import job_log

with job_log(snakemake.log[0]):
    start_job(snakemake.threads)
    p = snakemake.params
    run_swap_costs_group(p.entries, p.data, snakemake.output.summary, snakemake.output.matrix, device=p.device)
