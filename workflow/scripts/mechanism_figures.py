from lmcflow.jobs.figures import run_mechanism_figures
from lmcflow.logs import job_log

with job_log(snakemake.log[0]):
    run_mechanism_figures(snakemake.input.barriers, snakemake.input.layer_metrics, dict(snakemake.output.items()),
                          snakemake.params.definition)
