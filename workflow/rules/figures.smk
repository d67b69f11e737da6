localrules:
    width_figures,


rule width_figures:
    """Barrier vs width, error along λ and raw vs calibrated loss barrier for a width sweep."""
    input:
        barriers=study_table("{study}", "barriers"),
        interpolation=study_table("{study}", "interpolation"),
    output:
        barrier_png=report(f"{RESULTS}/figures/{{study}}/barrier_vs_width.png",
                           caption="../report/barrier_vs_width.rst", category="{study}"),
        barrier_pdf=f"{RESULTS}/figures/{{study}}/barrier_vs_width.pdf",
        lambda_png=report(f"{RESULTS}/figures/{{study}}/error_along_lambda.png",
                          caption="../report/error_along_lambda.rst", category="{study}"),
        lambda_pdf=f"{RESULTS}/figures/{{study}}/error_along_lambda.pdf",
        calib_png=report(f"{RESULTS}/figures/{{study}}/loss_barrier_raw_vs_calibrated.png",
                         caption="../report/loss_barrier_raw_vs_calibrated.rst", category="{study}"),
        calib_pdf=f"{RESULTS}/figures/{{study}}/loss_barrier_raw_vs_calibrated.pdf",
    log:
        f"{LOGS}/figures/{{study}}/width.log",
    params:
        definition="entezari",
    script:
        "../scripts/width_figures.py"
