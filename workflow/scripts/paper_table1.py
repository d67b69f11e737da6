from lmcflow.jobs.figures import run_paper_table1
from lmcflow.logs import job_log

with job_log(snakemake.log[0]):
    run_paper_table1(list(snakemake.input), dict(snakemake.params.studies), snakemake.output.table,
                     snakemake.output.png, snakemake.output.pdf)
