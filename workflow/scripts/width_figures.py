from lmcflow.jobs.figures import run_width_figures
from lmcflow.logs import job_log

with job_log(snakemake.log[0]):
    run_width_figures(snakemake.input.barriers, snakemake.input.interpolation, dict(snakemake.output.items()),
                      snakemake.params.definition)
