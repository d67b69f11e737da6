from lmcflow.config import Point
from lmcflow.jobs import run_train_bundle, set_threads
from lmcflow.logs import job_log

with job_log(snakemake.log[0]):
    set_threads(snakemake.threads)
    run_train_bundle(Point.from_dict(snakemake.params.point), snakemake.params.seeds, snakemake.input.data,
                     snakemake.output[0], device=snakemake.params.device, state_dir=snakemake.params.state_dir)
