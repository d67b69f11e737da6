localrules:
    study_table,
    study_barriers,
    result_table,


rule study_table:
    """One study's per-job rows concatenated into a typed table."""
    input:
        lambda wc: study_inputs(wc.study, wc.kind),
    output:
        study_table("{study}", "{kind}"),
    log:
        f"{LOGS}/tables/{{study}}/{{kind}}.log",
    wildcard_constraints:
        kind="runs|interpolation|alignment|layer_metrics",
    params:
        kind=lambda wc: wc.kind,
        files=lambda wc: study_table_files(wc.study, wc.kind),
    script:
        "../scripts/concat_table.py"


rule study_barriers:
    """Barriers (three definitions, raw and calibrated) from a study's interpolation curves."""
    input:
        study_table("{study}", "interpolation"),
    output:
        study_table("{study}", "barriers"),
    log:
        f"{LOGS}/tables/{{study}}/barriers.log",
    script:
        "../scripts/barriers.py"


rule result_table:
    """All studies' tables in one file under results/tables/."""
    input:
        lambda wc: [study_table(s, wc.kind) for s in table_studies(wc.kind)],
    output:
        f"{RESULTS}/tables/{{kind}}.parquet",
    log:
        f"{LOGS}/tables/all_{{kind}}.log",
    wildcard_constraints:
        kind="runs|interpolation|barriers|alignment|layer_metrics|" + "|".join(IDENT_TABLE_KINDS),
    params:
        kind=lambda wc: wc.kind,
        files=lambda wc: [study_table(s, wc.kind) for s in table_studies(wc.kind)],
    script:
        "../scripts/concat_table.py"


localrules:
    paper_table1,


rule paper_table1:
    """The width paper's Table 1 beside ours: midpoint test error barrier at each width study's widest width, plain
    average and weight matching, seed-level CI, the paper's value beside it (lmcflow.paper_table1); and its figure."""
    input:
        lambda wc: [study_table(s, "barriers") for s in table1_studies()],
    output:
        table=TABLE1_TABLE,
        png=report(TABLE1_FIGURES[0], caption="../report/paper_table1.rst", category="Table 1"),
        pdf=TABLE1_FIGURES[1],
    log:
        f"{LOGS}/tables/paper_table1.log",
    params:
        studies=table1_studies(),
    script:
        "../scripts/paper_table1.py"


# --------------------------------------------------------------------------- identifiability paper
localrules:
    identifiability_study_table,
    coherence_table,


rule identifiability:
    """Every seed pair of a pair block, for every point of a grid group with analysis.identifiability: activation-
    matching objective per hidden layer, and unaligned vs aligned (activation matching) LMC on the effective
    weights (the unaligned paths read from rule interpolate's file)."""
    input:
        data=lambda wc: sorted(group_data(wc).values()),
        bundles=block_bundles,
        interpolation=identity_paths_file,
    output:
        matching=ident_point_file("{study}", "{group}", "identifiability", "{blocks}"),
        lmc=ident_point_file("{study}", "{group}", "identifiability_lmc", "{blocks}"),
    log:
        f"{LOGS}/identifiability/{{study}}/{{group}}/identifiability-{{blocks}}.log",
    threads: config["threads"]["merge"]
    resources:
        mem_mb=point_resources("merge", "mem_mb"),
        runtime=point_resources("merge", "runtime"),
        gpu=point_resources("merge", "gpu"),
    params:
        points=lambda wc: [
            {
                "point": point_job_dict(p, "model", "train", "merge", analysis=IDENT_ANALYSIS_KEYS["identifiability"]),
                "models": pair_models(wc.study, p.point, block_pairs(wc)),
            }
            for p in group_analysis_points(wc, "identifiability")
        ],
        pairs=block_pairs,
        data=group_data,
        device=config["device"],
    script:
        "../scripts/identifiability.py"


rule swap_costs:
    """Realization and swap costs of every hidden weight layer of each trained model of a bundle (every point of
    its grid group with analysis.swap_costs)."""
    input:
        data=lambda wc: sorted(group_data(wc).values()),
        bundle=bundle_dir("{study}", "{group}", "{block}"),
    output:
        summary=ident_point_file("{study}", "{group}", "swap_costs", "{block}"),
        matrix=ident_point_file("{study}", "{group}", "swap_matrix", "{block}"),
    log:
        f"{LOGS}/identifiability/{{study}}/{{group}}/swap_costs-{{block}}.log",
    threads: config["threads"]["merge"]
    resources:
        mem_mb=point_resources("merge", "mem_mb"),
        runtime=point_resources("merge", "runtime"),
        gpu=point_resources("merge", "gpu"),
    params:
        points=lambda wc: [
            {
                "point": point_job_dict(p, "model", "train", analysis=IDENT_ANALYSIS_KEYS["swap_costs"]),
                "models": {s: model_paths(wc.study, p.point, s) for s in block_seeds(wc)},
            }
            for p in group_analysis_points(wc, "swap_costs")
        ],
        data=group_data,
        device=config["device"],
    script:
        "../scripts/swap_costs.py"


rule identifiability_study_table:
    """One study's per-pair / per-model identifiability rows concatenated into a typed table."""
    input:
        lambda wc: ident_study_inputs(wc.study, wc.kind),
    output:
        study_table("{study}", "{kind}"),
    log:
        f"{LOGS}/tables/{{study}}/{{kind}}.log",
    wildcard_constraints:
        kind="identifiability|identifiability_lmc|swap_costs|swap_matrix",
    params:
        kind=lambda wc: wc.kind,
        files=lambda wc: ident_study_inputs(wc.study, wc.kind),
    script:
        "../scripts/concat_table.py"


rule coherence_table:
    """Subspace coherence ν of each point's inputs and the barriers of the study's interpolation curves."""
    input:
        interpolation=study_table("{study}", "interpolation"),
        data=lambda wc: sorted({data_file(p.dataset) for p in analysis_points(wc.study, "coherence")}),
    output:
        study_table("{study}", "coherence"),
    log:
        f"{LOGS}/tables/{{study}}/coherence.log",
    params:
        points=lambda wc: [
            p.job_dict("model", "train") | {"analysis": {k: p.analysis[k] for k in IDENT_ANALYSIS_KEYS["coherence"]}}
            for p in analysis_points(wc.study, "coherence")
        ],
        data_paths=lambda wc: {p.dataset: data_file(p.dataset) for p in analysis_points(wc.study, "coherence")},
    script:
        "../scripts/coherence_table.py"


# --------------------------------------------------------------------------- alignment and mechanism
rule mechanism:
    """LEWC/LLFC, weak additivity, reciprocal orthogonality, low rank and neuron activity of every seed pair of a
    pair block (B permuted by the method's alignment), per hidden layer on the λ grid."""
    input:
        data=lambda wc: data_file(point_of(wc).dataset),
        bundles=block_bundles,
        alignment=lambda wc: block_alignments(wc, [wc.method]).get(wc.method, []),
    output:
        mechanism_file("{study}", "{point}", "{method}", "{blocks}"),
    log:
        f"{LOGS}/mechanism/{{study}}/{{point}}/{{method}}/blocks-{{blocks}}.log",
    threads: config["threads"]["merge"]
    resources:
        mem_mb=point_resources("merge", "mem_mb"),
        runtime=point_resources("merge", "runtime"),
        gpu=point_resources("merge", "gpu"),
    params:
        point=lambda wc: job_point(wc, "model", "train", merge=["bn_reset_size"], analysis=["mechanism"]),
        pairs=block_pairs,
        models=block_models,
        alignment=lambda wc: block_alignments(wc, [wc.method]).get(wc.method),
        device=config["device"],
    script:
        "../scripts/mechanism.py"
