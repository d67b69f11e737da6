from lmcflow.report_jobs import job_log, run_barriers

with job_log(snakemake.log[0]):
    run_barriers(snakemake.input[0], snakemake.output[0])
