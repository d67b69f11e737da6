from lmcflow.logs import job_log
from lmcflow.report_jobs import run_mechanism_figures

with job_log(snakemake.log[0]):
    run_mechanism_figures(snakemake.input.barriers, snakemake.input.layer_metrics, dict(snakemake.output.items()),
                          snakemake.params.definition)
