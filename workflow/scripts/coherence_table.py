from lmcflow.config import Point
from lmcflow.jobs import job_log, run_coherence_table

with job_log(snakemake.log[0]) as log:
    run_coherence_table([Point.from_dict(p) for p in snakemake.params.points], snakemake.input.interpolation,
                        dict(snakemake.params.data_paths), snakemake.output[0], log=log)
