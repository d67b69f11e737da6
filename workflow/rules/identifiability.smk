localrules:
    coherence_table,


rule identifiability:
    """Every seed pair of a pair block, for every point of a grid group with analysis.identifiability: activation-
    matching objective per hidden layer, and unaligned vs aligned (activation matching) LMC on the effective
    weights (the unaligned paths read from rule interpolate's file)."""
    input:
        data=group_data_files,
        bundles=block_bundles,
        interpolation=identity_paths_file,
    output:
        matching=ident_point_file("{study}", "{group}", "identifiability", "{blocks}"),
        lmc=ident_point_file("{study}", "{group}", "identifiability_lmc", "{blocks}"),
    log:
        f"{LOGS}/identifiability/{{study}}/{{group}}/identifiability-{{blocks}}.log",
    threads: config["threads"]["merge"]
    resources:
        mem_mb=point_resources("identifiability", "mem_mb"),
        runtime=point_resources("identifiability", "runtime"),
        gpu=point_resources("identifiability", "gpu"),
    params:
        points=ident_points,
        pairs=block_pairs,
        data=group_data,
        device=config["device"],
    script:
        "../scripts/identifiability.py"


rule swap_costs:
    """Realization and swap costs of every hidden weight layer of each trained model of a bundle (every point of
    its grid group with analysis.swap_costs)."""
    input:
        data=group_data_files,
        bundle=bundle_dir("{study}", "{group}", "{block}"),
    output:
        summary=ident_point_file("{study}", "{group}", "swap_costs", "{block}"),
        matrix=ident_point_file("{study}", "{group}", "swap_matrix", "{block}"),
    log:
        f"{LOGS}/identifiability/{{study}}/{{group}}/swap_costs-{{block}}.log",
    threads: config["threads"]["merge"]
    resources:
        mem_mb=point_resources("swap_costs", "mem_mb"),
        runtime=point_resources("swap_costs", "runtime"),
        gpu=point_resources("swap_costs", "gpu"),
    params:
        points=swap_points,
        data=group_data,
        device=config["device"],
    script:
        "../scripts/swap_costs.py"


rule coherence_table:
    """Subspace coherence ν of each point's inputs and the barriers of the study's interpolation curves."""
    input:
        interpolation=study_table("{study}", "interpolation"),
        data=coherence_data_files,
    output:
        study_table("{study}", "coherence"),
    log:
        f"{LOGS}/tables/{{study}}/coherence.log",
    params:
        points=coherence_points,
        data_paths=coherence_data_paths,
    script:
        "../scripts/coherence_table.py"
