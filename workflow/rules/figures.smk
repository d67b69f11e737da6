localrules:
    width_figures,
    extension_figures,


rule width_figures:
    """Barrier vs width, error along λ, raw vs calibrated loss barrier and logit norm along λ for a width sweep."""
    input:
        barriers=PLAN.paths.study_table("{study}", "barriers"),
        interpolation=PLAN.paths.study_table("{study}", "interpolation"),
    output:
        barrier_png=report(
            f"{RESULTS}/figures/{{study}}/barrier_vs_width.png",
            caption="../report/barrier_vs_width.rst",
            category="{study}",
        ),
        barrier_pdf=f"{RESULTS}/figures/{{study}}/barrier_vs_width.pdf",
        lambda_png=report(
            f"{RESULTS}/figures/{{study}}/error_along_lambda.png",
            caption="../report/error_along_lambda.rst",
            category="{study}",
        ),
        lambda_pdf=f"{RESULTS}/figures/{{study}}/error_along_lambda.pdf",
        calib_png=report(
            f"{RESULTS}/figures/{{study}}/loss_barrier_raw_vs_calibrated.png",
            caption="../report/loss_barrier_raw_vs_calibrated.rst",
            category="{study}",
        ),
        calib_pdf=f"{RESULTS}/figures/{{study}}/loss_barrier_raw_vs_calibrated.pdf",
        logit_png=report(
            f"{RESULTS}/figures/{{study}}/logit_norm_along_lambda.png",
            caption="../report/logit_norm_along_lambda.rst",
            category="{study}",
        ),
        logit_pdf=f"{RESULTS}/figures/{{study}}/logit_norm_along_lambda.pdf",
    log:
        f"{LOGS}/figures/{{study}}/width.log",
    params:
        definition="entezari",
    script:
        "../scripts/width_figures.py"


# --------------------------------------------------------------------------- identifiability paper
localrules:
    identifiability_figures,
    swap_cost_figures,
    coherence_figures,
    lmc_vs_k_figure,


rule identifiability_figures:
    """Optimal / identity / random activation-matching objective vs σ_F; unaligned vs aligned barrier vs σ_F."""
    input:
        matching=PLAN.paths.study_table("{study}", "identifiability"),
        lmc=PLAN.paths.study_table("{study}", "identifiability_lmc"),
    output:
        objective_png=report(
            f"{RESULTS}/figures/{{study}}/objective_vs_sigma_f.png",
            caption="../report/objective_vs_sigma_f.rst",
            category="{study}",
        ),
        objective_pdf=f"{RESULTS}/figures/{{study}}/objective_vs_sigma_f.pdf",
        barrier_png=report(
            f"{RESULTS}/figures/{{study}}/barrier_vs_sigma_f.png",
            caption="../report/barrier_vs_sigma_f.rst",
            category="{study}",
        ),
        barrier_pdf=f"{RESULTS}/figures/{{study}}/barrier_vs_sigma_f.pdf",
        modes_png=report(
            f"{RESULTS}/figures/{{study}}/matching_modes.png",
            caption="../report/matching_modes.rst",
            category="{study}",
        ),
        modes_pdf=f"{RESULTS}/figures/{{study}}/matching_modes.pdf",
    log:
        f"{LOGS}/figures/{{study}}/identifiability.log",
    script:
        "../scripts/identifiability_figures.py"


rule swap_cost_figures:
    """Swap-cost heatmaps (k × σ_F) and median / fraction-negative swap cost vs k."""
    input:
        summary=PLAN.paths.study_table("{study}", "swap_costs"),
        matrix=PLAN.paths.study_table("{study}", "swap_matrix"),
    output:
        heatmaps_png=report(
            f"{RESULTS}/figures/{{study}}/swap_cost_heatmaps.png",
            caption="../report/swap_cost_heatmaps.rst",
            category="{study}",
        ),
        heatmaps_pdf=f"{RESULTS}/figures/{{study}}/swap_cost_heatmaps.pdf",
        summary_png=report(
            f"{RESULTS}/figures/{{study}}/swap_cost_vs_k.png",
            caption="../report/swap_cost_vs_k.rst",
            category="{study}",
        ),
        summary_pdf=f"{RESULTS}/figures/{{study}}/swap_cost_vs_k.pdf",
        ridge_png=report(
            f"{RESULTS}/figures/{{study}}/swap_cost_heatmaps_ridge.png",
            caption="../report/swap_cost_heatmaps_ridge.rst",
            category="{study}",
        ),
        ridge_pdf=f"{RESULTS}/figures/{{study}}/swap_cost_heatmaps_ridge.pdf",
        ridge_scatter_png=report(
            f"{RESULTS}/figures/{{study}}/ridge_vs_closed_form.png",
            caption="../report/ridge_vs_closed_form.rst",
            category="{study}",
        ),
        ridge_scatter_pdf=f"{RESULTS}/figures/{{study}}/ridge_vs_closed_form.pdf",
        geometry_png=report(
            f"{RESULTS}/figures/{{study}}/representation_geometry.png",
            caption="../report/representation_geometry.rst",
            category="{study}",
        ),
        geometry_pdf=f"{RESULTS}/figures/{{study}}/representation_geometry.pdf",
    log:
        f"{LOGS}/figures/{{study}}/swap_costs.log",
    script:
        "../scripts/swap_cost_figures.py"


rule lmc_vs_k_figure:
    """Unaligned relative accuracy drop vs the data's intrinsic dimension k, beside the paper's values."""
    input:
        interpolation=PLAN.paths.study_table("{study}", "interpolation"),
        summary=PLAN.paths.study_table("{study}", "swap_costs"),
    output:
        png=report(f"{RESULTS}/figures/{{study}}/lmc_vs_k.png", caption="../report/lmc_vs_k.rst", category="{study}"),
        pdf=f"{RESULTS}/figures/{{study}}/lmc_vs_k.pdf",
    log:
        f"{LOGS}/figures/{{study}}/lmc_vs_k.log",
    script:
        "../scripts/lmc_vs_k_figure.py"


rule coherence_figures:
    """Midpoint barrier of the unaligned path vs subspace coherence ν."""
    input:
        PLAN.paths.study_table("{study}", "coherence"),
    output:
        barrier_png=report(
            f"{RESULTS}/figures/{{study}}/barrier_vs_nu.png", caption="../report/barrier_vs_nu.rst", category="{study}"
        ),
        barrier_pdf=f"{RESULTS}/figures/{{study}}/barrier_vs_nu.pdf",
    log:
        f"{LOGS}/figures/{{study}}/coherence.log",
    script:
        "../scripts/coherence_figures.py"


# --------------------------------------------------------------------------- alignment and mechanism
localrules:
    mechanism_figures,


rule mechanism_figures:
    """Barrier vs width per method; LEWC/LLFC, cross-norm ratios and rank vs width; default vs weak weight decay."""
    input:
        barriers=PLAN.paths.study_table("{study}", "barriers"),
        layer_metrics=PLAN.paths.study_table("{study}", "layer_metrics"),
    output:
        methods_png=report(
            f"{RESULTS}/figures/{{study}}/method_barrier_vs_width.png",
            caption="../report/method_barrier_vs_width.rst",
            category="{study}",
        ),
        methods_pdf=f"{RESULTS}/figures/{{study}}/method_barrier_vs_width.pdf",
        lewc_png=report(
            f"{RESULTS}/figures/{{study}}/lewc_vs_width.png", caption="../report/lewc_vs_width.rst", category="{study}"
        ),
        lewc_pdf=f"{RESULTS}/figures/{{study}}/lewc_vs_width.pdf",
        cross_png=report(
            f"{RESULTS}/figures/{{study}}/cross_ratio_vs_width.png",
            caption="../report/cross_ratio_vs_width.rst",
            category="{study}",
        ),
        cross_pdf=f"{RESULTS}/figures/{{study}}/cross_ratio_vs_width.pdf",
        rank_png=report(
            f"{RESULTS}/figures/{{study}}/rank_vs_width.png", caption="../report/rank_vs_width.rst", category="{study}"
        ),
        rank_pdf=f"{RESULTS}/figures/{{study}}/rank_vs_width.pdf",
        wd_png=report(
            f"{RESULTS}/figures/{{study}}/weight_decay_comparison.png",
            caption="../report/weight_decay_comparison.rst",
            category="{study}",
        ),
        wd_pdf=f"{RESULTS}/figures/{{study}}/weight_decay_comparison.pdf",
    log:
        f"{LOGS}/figures/{{study}}/mechanism.log",
    params:
        definition="entezari",
    script:
        "../scripts/mechanism_figures.py"


rule extension_figures:
    """The width paper's extensions: the fraction of the plain loss barrier removed by calibration, REPAIR and both
    vs width, and the N-model average vs the N-model ensemble vs width."""
    input:
        barriers=PLAN.paths.study_table("{study}", "barriers"),
        merge_many=PLAN.paths.study_table("{study}", "merge_many"),
    output:
        repair_png=report(
            f"{RESULTS}/figures/{{study}}/repair_vs_calibration.png",
            caption="../report/repair_vs_calibration.rst",
            category="{study}",
        ),
        repair_pdf=f"{RESULTS}/figures/{{study}}/repair_vs_calibration.pdf",
        many_png=report(
            f"{RESULTS}/figures/{{study}}/many_model_ensemble.png",
            caption="../report/many_model_ensemble.rst",
            category="{study}",
        ),
        many_pdf=f"{RESULTS}/figures/{{study}}/many_model_ensemble.pdf",
    log:
        f"{LOGS}/figures/{{study}}/extensions.log",
    params:
        definition="entezari",
    script:
        "../scripts/extension_figures.py"
