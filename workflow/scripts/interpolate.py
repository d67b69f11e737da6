from lmcflow.jobs.merge import run_merge_group
from lmcflow.kernels import start_job
from lmcflow.logs import job_log

with job_log(snakemake.log[0]):
    start_job(snakemake.threads)
    p = snakemake.params
    run_merge_group(p.entries, p.pairs, p.data, snakemake.output[0], device=p.device)
