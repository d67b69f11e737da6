localrules:
    coherence_table,


rule identifiability:
    """Every seed pair of a pair block, for every point of a grid group with analysis.identifiability: activation-
    matching objective per hidden layer, and unaligned vs aligned (activation matching) LMC on the effective
    weights (the unaligned paths read from rule interpolate's file)."""
    input:
        data=PLAN.grid.group_data_files,
        bundles=PLAN.grid.block_bundles,
        interpolation=PLAN.ident.identity_paths_file,
    output:
        matching=PLAN.paths.ident_point_file("{study}", "{group}", "identifiability", "{blocks}"),
        lmc=PLAN.paths.ident_point_file("{study}", "{group}", "identifiability_lmc", "{blocks}"),
    log:
        f"{LOGS}/identifiability/{{study}}/{{group}}/identifiability-{{blocks}}.log",
    threads: config["threads"]["merge"]
    resources:
        mem_mb=PLAN.resources("identifiability", "mem_mb"),
        runtime=PLAN.resources("identifiability", "runtime"),
        gpu=PLAN.resources("identifiability", "gpu"),
    params:
        entries=PLAN.ident.entries,
        pairs=PLAN.grid.block_pairs,
        data=PLAN.grid.group_data,
        device=config["device"],
    script:
        "../scripts/identifiability.py"


rule swap_costs:
    """Realization and swap costs of every hidden weight layer of each trained model of a bundle (every point of
    its grid group with analysis.swap_costs)."""
    input:
        data=PLAN.grid.group_data_files,
        bundle=PLAN.paths.bundle_dir("{study}", "{group}", "{block}"),
    output:
        summary=PLAN.paths.ident_point_file("{study}", "{group}", "swap_costs", "{block}"),
        matrix=PLAN.paths.ident_point_file("{study}", "{group}", "swap_matrix", "{block}"),
    log:
        f"{LOGS}/identifiability/{{study}}/{{group}}/swap_costs-{{block}}.log",
    threads: config["threads"]["merge"]
    resources:
        mem_mb=PLAN.resources("swap_costs", "mem_mb"),
        runtime=PLAN.resources("swap_costs", "runtime"),
        gpu=PLAN.resources("swap_costs", "gpu"),
    params:
        entries=PLAN.ident.swap_entries,
        data=PLAN.grid.group_data,
        device=config["device"],
    script:
        "../scripts/swap_costs.py"


rule coherence_table:
    """Subspace coherence ν of each point's inputs and the barriers of the study's interpolation curves."""
    input:
        interpolation=PLAN.paths.study_table("{study}", "interpolation"),
        data=PLAN.ident.coherence_data_files,
    output:
        PLAN.paths.study_table("{study}", "coherence"),
    log:
        f"{LOGS}/tables/{{study}}/coherence.log",
    params:
        points=PLAN.ident.coherence_points,
        data=PLAN.ident.coherence_data,
    script:
        "../scripts/coherence_table.py"
