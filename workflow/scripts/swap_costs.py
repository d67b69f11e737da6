from lmcflow.config import Point
from lmcflow.logs import job_log
from lmcflow.jobs import run_swap_costs, set_threads

with job_log(snakemake.log[0]):
    set_threads(snakemake.threads)
    point = Point.from_dict(snakemake.params.point)
    inp = snakemake.input
    run_swap_costs(point, {s: inp[f"ckpt_{s}"] for s in point.seeds}, {s: inp[f"row_{s}"] for s in point.seeds},
                   inp.data, snakemake.output.summary, snakemake.output.matrix, device=snakemake.params.device)
