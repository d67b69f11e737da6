from lmcflow.jobs.report import run_report_front_page
from lmcflow.logs import job_log

with job_log(snakemake.log[0]):
    run_report_front_page(snakemake.input[0], snakemake.output[0], list(snakemake.params.studies))
