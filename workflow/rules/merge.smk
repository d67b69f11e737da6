rule interpolate:
    """Evaluate θ(λ) = (1−λ)θ_A + λθ_B on the λ grid, raw and temperature-calibrated, for every seed pair of a
    pair block, every point of a grid group and every merge method of the point (B permuted by rule align's
    permutations for method ≠ identity)."""
    input:
        data=PLAN.grid.group_data_files,
        bundles=PLAN.grid.block_bundles,
        alignment=PLAN.merge.alignment_files,
    output:
        PLAN.paths.merge_file("{study}", "{group}", "{blocks}"),
    log:
        f"{LOGS}/merge/{{study}}/{{group}}/blocks-{{blocks}}.log",
    threads: config["threads"]["merge"]
    resources:
        mem_mb=PLAN.resources("interpolate", "mem_mb"),
        runtime=PLAN.resources("interpolate", "runtime"),
        gpu=PLAN.resources("interpolate", "gpu"),
    params:
        entries=PLAN.merge.entries,
        pairs=PLAN.grid.block_pairs,
        data=PLAN.grid.group_data,
        device=config["device"],
    script:
        "../scripts/interpolate.py"


rule align:
    """Permutations aligning model B to model A with one method (weight matching, activation matching,
    random permutation) for every seed pair of a pair block, in one safetensors file; objective, iterations
    and time in one row per pair."""
    input:
        data=PLAN.grid.point_data_file,
        bundles=PLAN.grid.block_bundles,
    output:
        perms=PLAN.paths.align_file("{study}", "{point}", "{method}", "{blocks}"),
        rows=PLAN.paths.align_row_file("{study}", "{point}", "{method}", "{blocks}"),
    log:
        f"{LOGS}/align/{{study}}/{{point}}/{{method}}/blocks-{{blocks}}.log",
    threads: config["threads"]["merge"]
    resources:
        mem_mb=PLAN.resources("align", "mem_mb"),
        runtime=PLAN.resources("align", "runtime"),
        gpu=PLAN.resources("align", "gpu"),
    params:
        point=PLAN.merge.align_point,
        pairs=PLAN.grid.block_pairs,
        models=PLAN.grid.block_models,
        device=config["device"],
    script:
        "../scripts/align.py"


rule merge_many:
    """N-way merges of one point's seeds (every N-subset of merge.many.sizes, every N-way method: plain average,
    MergeMany weight matching, activation matching onto one model), plain and with REPAIR, beside the mean endpoint
    and the N models' logit ensemble."""
    input:
        data=PLAN.grid.point_data_file,
        bundles=PLAN.merge.many_bundles,
    output:
        PLAN.paths.merge_many_file("{study}", "{point}"),
    log:
        f"{LOGS}/merge_many/{{study}}/{{point}}.log",
    threads: config["threads"]["merge"]
    resources:
        mem_mb=PLAN.resources("merge_many", "mem_mb"),
        runtime=PLAN.resources("merge_many", "runtime"),
        gpu=PLAN.resources("merge_many", "gpu"),
    params:
        point=PLAN.merge.many_point,
        models=PLAN.merge.many_models,
        device=config["device"],
    script:
        "../scripts/merge_many.py"
