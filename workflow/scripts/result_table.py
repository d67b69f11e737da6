from lmcflow.jobs.report import run_result_table
from lmcflow.logs import job_log

with job_log(snakemake.log[0]):
    run_result_table(
        list(snakemake.params.files), snakemake.params.kind, {k: snakemake.output[k] for k in snakemake.output.keys()}
    )
