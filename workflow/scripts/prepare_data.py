from lmcflow.jobs.data import run_prepare_data
from lmcflow.logs import job_log

with job_log(snakemake.log[0]):
    run_prepare_data(snakemake.wildcards.dataset, snakemake.params.data_cfg, snakemake.output[0],
                     snakemake.params.cache_root)
