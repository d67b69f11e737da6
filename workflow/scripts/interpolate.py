from lmcflow.config import Point
from lmcflow.jobs import job_log, run_merge, set_threads

with job_log(snakemake.log[0]) as log:
    set_threads(snakemake.threads)
    wc = snakemake.wildcards
    run_merge(Point.from_dict(snakemake.params.point), wc.method, int(wc.seed_a), int(wc.seed_b),
              list(snakemake.input.ckpts), list(snakemake.input.rows), snakemake.input.data,
              snakemake.output[0], device=snakemake.params.device, log=log,
              alignment=list(snakemake.input.alignment))
