from lmcflow.config import Point
from lmcflow.jobs import run_merge_block, set_threads
from lmcflow.logs import job_log

with job_log(snakemake.log[0]):
    set_threads(snakemake.threads)
    p = snakemake.params
    run_merge_block(Point.from_dict(p.point), p.pairs, p.methods, p.models, p.alignment, snakemake.input.data,
                    snakemake.output[0], device=p.device)
