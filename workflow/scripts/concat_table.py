from lmcflow.report_jobs import job_log, run_concat

with job_log(snakemake.log[0]):
    run_concat(list(snakemake.input), snakemake.params.kind, snakemake.output[0])
