from lmcflow.config import Point
from lmcflow.jobs import job_log, run_train, set_threads

with job_log(snakemake.log[0]) as log:
    set_threads(snakemake.threads)
    run_train(Point.from_dict(snakemake.params.point), int(snakemake.wildcards.seed), snakemake.input.data,
              snakemake.output.ckpt, snakemake.output.row, device=snakemake.params.device, log=log)
