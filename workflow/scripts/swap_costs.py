from lmcflow.config import Point
from lmcflow.jobs import run_swap_costs, set_threads
from lmcflow.logs import job_log

with job_log(snakemake.log[0]):
    set_threads(snakemake.threads)
    p = snakemake.params
    run_swap_costs(Point.from_dict(p.point), p.models, snakemake.input.data, snakemake.output.summary,
                   snakemake.output.matrix, device=p.device)
