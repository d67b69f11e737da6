rule interpolate:
    """Evaluate θ(λ) = (1−λ)θ_A + λθ_B on the λ grid, raw and temperature-calibrated, for every seed pair of a
    pair block, every point of a grid group and every merge method of the point (B permuted by rule align's
    permutations for method ≠ identity)."""
    input:
        data=group_data_files,
        bundles=block_bundles,
        alignment=merge_alignment_files,
    output:
        merge_file("{study}", "{group}", "{blocks}"),
    log:
        f"{LOGS}/merge/{{study}}/{{group}}/blocks-{{blocks}}.log",
    threads: config["threads"]["merge"]
    resources:
        mem_mb=point_resources("interpolate", "mem_mb"),
        runtime=point_resources("interpolate", "runtime"),
        gpu=point_resources("interpolate", "gpu"),
    params:
        points=merge_entries,
        pairs=block_pairs,
        data=group_data,
        device=config["device"],
    script:
        "../scripts/interpolate.py"


rule align:
    """Permutations aligning model B to model A with one method (weight matching, activation matching,
    random permutation) for every seed pair of a pair block, in one safetensors file; objective, iterations
    and time in one row per pair."""
    input:
        data=point_data_file,
        bundles=block_bundles,
    output:
        perms=align_file("{study}", "{point}", "{method}", "{blocks}"),
        rows=align_row_file("{study}", "{point}", "{method}", "{blocks}"),
    log:
        f"{LOGS}/align/{{study}}/{{point}}/{{method}}/blocks-{{blocks}}.log",
    threads: config["threads"]["merge"]
    resources:
        mem_mb=point_resources("align", "mem_mb"),
        runtime=point_resources("align", "runtime"),
        gpu=point_resources("align", "gpu"),
    params:
        point=align_point,
        pairs=block_pairs,
        models=block_models,
        device=config["device"],
    script:
        "../scripts/align.py"


rule merge_many:
    """N-way merges of one point's seeds (every N-subset of merge.many.sizes, every N-way method: plain average,
    MergeMany weight matching, activation matching onto one model), plain and with REPAIR, beside the mean endpoint
    and the N models' logit ensemble."""
    input:
        data=point_data_file,
        bundles=many_bundles,
    output:
        merge_many_file("{study}", "{point}"),
    log:
        f"{LOGS}/merge_many/{{study}}/{{point}}.log",
    threads: config["threads"]["merge"]
    resources:
        mem_mb=point_resources("merge_many", "mem_mb"),
        runtime=point_resources("merge_many", "runtime"),
        gpu=point_resources("merge_many", "gpu"),
    params:
        point=many_point,
        models=many_models,
        device=config["device"],
    script:
        "../scripts/merge_many.py"
