from lmcflow.config import Point
from lmcflow.jobs.align import run_align_block
from lmcflow.kernels import start_job
from lmcflow.logs import job_log

with job_log(snakemake.log[0]):
    start_job(snakemake.threads)
    p = snakemake.params
    run_align_block(Point.from_dict(p.point), snakemake.wildcards.method, p.pairs, p.models, snakemake.input.data,
                    snakemake.output.perms, snakemake.output.rows, device=p.device)
