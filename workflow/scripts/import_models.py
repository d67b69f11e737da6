from lmcflow.jobs.imported import run_import
from lmcflow.kernels import start_job
from lmcflow.logs import job_log
from lmcflow.plan.kept import record_members

with job_log(snakemake.log[0]):
    start_job(snakemake.threads)
    p = snakemake.params
    run_import(p.point, p.models, p.sources, snakemake.input.data[0], device=p.device)
    record_members(snakemake.output[0], [int(s) for s in p.models])
