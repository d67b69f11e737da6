from lmcflow.jobs.common import set_threads
from lmcflow.jobs.identifiability import run_swap_costs_group
from lmcflow.logs import job_log

with job_log(snakemake.log[0]):
    set_threads(snakemake.threads)
    p = snakemake.params
    run_swap_costs_group(p.points, p.data, snakemake.output.summary, snakemake.output.matrix, device=p.device)
