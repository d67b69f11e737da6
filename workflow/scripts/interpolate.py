from lmcflow.jobs import run_merge_group, set_threads
from lmcflow.logs import job_log

with job_log(snakemake.log[0]):
    set_threads(snakemake.threads)
    p = snakemake.params
    run_merge_group(p.points, p.pairs, p.data, snakemake.output[0], device=p.device)
