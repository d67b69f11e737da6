from lmcflow.logs import job_log
from lmcflow.report_jobs import run_report_front_page

with job_log(snakemake.log[0]):
    run_report_front_page(snakemake.input[0], snakemake.output[0], list(snakemake.params.studies))
