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
    script:
        "../scripts/concat_table.py"


# --------------------------------------------------------------------------- identifiability paper
localrules:
    identifiability_study_table,
    coherence_table,


rule identifiability:
    """Every seed pair of a point: activation-matching objective per hidden layer, and unaligned vs aligned
    (activation matching) LMC on the effective weights."""
    input:
        unpack(point_models),
        data=lambda wc: data_file(point_of(wc).dataset),
    output:
        matching=ident_point_file("{study}", "{point}", "identifiability"),
        lmc=ident_point_file("{study}", "{point}", "identifiability_lmc"),
    log:
        f"{LOGS}/identifiability/{{study}}/{{point}}/identifiability.log",
    params:
        point=lambda wc: point_of(wc).to_dict(),
        device=config["device"],
    threads: config["threads"]["merge"]
    resources:
        mem_mb=point_resources("merge", "mem_mb", 4000),
        runtime=point_resources("merge", "runtime", 30),
        gpu=point_resources("merge", "gpu", 0),
    script:
        "../scripts/identifiability.py"


rule swap_costs:
    """Realization and swap costs of every hidden weight layer of each trained model of a point."""
    input:
        unpack(point_models),
        data=lambda wc: data_file(point_of(wc).dataset),
    output:
        summary=ident_point_file("{study}", "{point}", "swap_costs"),
        matrix=ident_point_file("{study}", "{point}", "swap_matrix"),
    log:
        f"{LOGS}/identifiability/{{study}}/{{point}}/swap_costs.log",
    params:
        point=lambda wc: point_of(wc).to_dict(),
        device=config["device"],
    threads: config["threads"]["merge"]
    resources:
        mem_mb=point_resources("merge", "mem_mb", 4000),
        runtime=point_resources("merge", "runtime", 30),
        gpu=point_resources("merge", "gpu", 0),
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
        points=lambda wc: [p.to_dict() for p in analysis_points(wc.study, "coherence")],
        data_paths=lambda wc: {p.dataset: data_file(p.dataset) for p in analysis_points(wc.study, "coherence")},
    script:
        "../scripts/coherence_table.py"


# --------------------------------------------------------------------------- alignment and mechanism
rule mechanism:
    """LEWC/LLFC, weak additivity, reciprocal orthogonality, low rank and neuron activity of one seed pair
    (B permuted by the method's alignment), per hidden layer on the λ grid."""
    input:
        data=lambda wc: data_file(point_of(wc).dataset),
        ckpts=lambda wc: [model_file(wc.study, wc.point, s) for s in (wc.seed_a, wc.seed_b)],
        rows=lambda wc: [run_row_file(wc.study, wc.point, s) for s in (wc.seed_a, wc.seed_b)],
        alignment=alignment_inputs,
    output:
        mechanism_file("{study}", "{point}", "{method}", "{seed_a}", "{seed_b}"),
    log:
        f"{LOGS}/mechanism/{{study}}/{{point}}/{{method}}/pair-{{seed_a}}-{{seed_b}}.log",
    params:
        point=lambda wc: point_of(wc).to_dict(),
        device=config["device"],
    threads: config["threads"]["merge"]
    resources:
        mem_mb=point_resources("merge", "mem_mb", 4000),
        runtime=point_resources("merge", "runtime", 30),
        gpu=point_resources("merge", "gpu", 0),
    script:
        "../scripts/mechanism.py"
