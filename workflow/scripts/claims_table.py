from lmcflow.report_jobs import job_log, run_claims_table

with job_log(snakemake.log[0]):
    run_claims_table(list(snakemake.input), snakemake.output[0])
