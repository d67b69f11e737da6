from lmcflow.config import Point
from lmcflow.jobs import job_log, run_swap_costs, set_threads

with job_log(snakemake.log[0]) as log:
    set_threads(snakemake.threads)
    run_swap_costs(Point.from_dict(snakemake.params.point), int(snakemake.wildcards.seed), snakemake.input.ckpt,
                   snakemake.input.row, snakemake.input.data, snakemake.output.summary, snakemake.output.matrix,
                   device=snakemake.params.device, log=log)
