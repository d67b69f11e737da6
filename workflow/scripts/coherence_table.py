from lmcflow.config import Point
from lmcflow.jobs.identifiability import run_coherence_table
from lmcflow.logs import job_log

with job_log(snakemake.log[0]):
    run_coherence_table([Point.from_dict(p) for p in snakemake.params.points], snakemake.input.interpolation,
                        dict(snakemake.params.data), snakemake.output[0])
