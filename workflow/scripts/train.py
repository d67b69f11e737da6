from lmcflow.jobs.train import run_train_job
from lmcflow.kernels import start_job
from lmcflow.logs import job_log
from lmcflow.plan.kept import record_members

with job_log(snakemake.log[0]):
    start_job(snakemake.threads)  # what Snakemake gave the job: threads.train, capped by --cores
    p = snakemake.params
    run_train_job(p.points, p.bundles, p.models, p.data, p.device, p.state_dir, p.stack_alone)
    record_members(snakemake.output[0], {seed for models in p.models.values() for seed in models})
