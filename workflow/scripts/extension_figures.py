from lmcflow.jobs.figures import run_extension_figures
from lmcflow.logs import job_log

with job_log(snakemake.log[0]):
    run_extension_figures(snakemake.input.barriers, snakemake.input.merge_many, dict(snakemake.output.items()),
                          snakemake.params.definition)
