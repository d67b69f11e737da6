from lmcflow.jobs import job_log, run_prepare_data

with job_log(snakemake.log[0]) as log:
    run_prepare_data(snakemake.wildcards.dataset, snakemake.params.data_cfg, snakemake.output[0],
                     snakemake.params.cache_root, log=log)
