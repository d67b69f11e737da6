from lmcflow.report_jobs import job_log, run_identifiability_figures

with job_log(snakemake.log[0]):
    run_identifiability_figures(snakemake.input.matching, snakemake.input.lmc, dict(snakemake.output.items()))
