from lmcflow.config import Point
from lmcflow.logs import job_log
from lmcflow.jobs import run_train, set_threads

with job_log(snakemake.log[0]):
    set_threads(snakemake.threads)
    run_train(Point.from_dict(snakemake.params.point), int(snakemake.wildcards.seed), snakemake.input.data,
              snakemake.output.ckpt, snakemake.output.row, device=snakemake.params.device)
