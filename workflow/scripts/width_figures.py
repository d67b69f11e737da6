from lmcflow.logs import job_log
from lmcflow.report_jobs import run_width_figures

with job_log(snakemake.log[0]):
    run_width_figures(snakemake.input.barriers, snakemake.input.interpolation, dict(snakemake.output.items()),
                      snakemake.params.definition)
