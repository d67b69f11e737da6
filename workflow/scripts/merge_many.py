from lmcflow.config import Point
from lmcflow.jobs.merge_many import run_merge_many
from lmcflow.kernels import start_job
from lmcflow.logs import job_log

with job_log(snakemake.log[0]):
    start_job(snakemake.config["threads"]["merge"])
    p = snakemake.params
    run_merge_many(Point.from_dict(p.point), p.models, snakemake.input.data, snakemake.output[0], device=p.device)
