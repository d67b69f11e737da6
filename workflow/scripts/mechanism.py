from lmcflow.config import Point
from lmcflow.logs import job_log
from lmcflow.jobs import run_mechanism, set_threads

with job_log(snakemake.log[0]):
    set_threads(snakemake.threads)
    wc = snakemake.wildcards
    run_mechanism(Point.from_dict(snakemake.params.point), wc.method, int(wc.seed_a), int(wc.seed_b),
                  list(snakemake.input.ckpts), list(snakemake.input.rows), snakemake.input.data,
                  snakemake.output[0], device=snakemake.params.device,
                  alignment=list(snakemake.input.alignment))
