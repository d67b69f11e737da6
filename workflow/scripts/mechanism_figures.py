from lmcflow.report_jobs import job_log, run_mechanism_figures

with job_log(snakemake.log[0]):
    run_mechanism_figures(snakemake.input.barriers, snakemake.input.layer_metrics, dict(snakemake.output.items()),
                          snakemake.params.definition)
