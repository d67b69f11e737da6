from lmcflow.jobs.identifiability import run_identifiability_group
from lmcflow.kernels import start_job
from lmcflow.logs import job_log

with job_log(snakemake.log[0]):
    start_job(snakemake.threads)
    p = snakemake.params
    run_identifiability_group(p.entries, p.pairs, p.data, snakemake.output.matching, snakemake.output.lmc,
                              device=p.device, interpolation=next(iter(snakemake.input.interpolation), None))
