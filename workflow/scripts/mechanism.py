from lmcflow.config import Point
from lmcflow.jobs.mechanism import run_mechanism_block
from lmcflow.kernels import start_job
from lmcflow.logs import job_log

with job_log(snakemake.log[0]):
    start_job(snakemake.threads)
    p = snakemake.params
    run_mechanism_block(Point.from_dict(p.point), snakemake.wildcards.method, p.pairs, p.models, p.alignment,
                        snakemake.input.data, snakemake.output.layer_metrics, device=p.device,
                        out_overlap=snakemake.output.active_overlap)
