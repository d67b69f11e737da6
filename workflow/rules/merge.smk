rule interpolate:
    """Evaluate θ(λ) = (1−λ)θ_A + λθ_B on the λ grid, raw and temperature-calibrated, for every seed pair of a
    pair block and every merge method of the point (B permuted by rule align's permutations for method ≠
    identity)."""
    input:
        data=lambda wc: data_file(point_of(wc).dataset),
        bundles=block_bundles,
        alignment=lambda wc: [f for fs in block_alignments(wc, merge_methods(point_of(wc))).values() for f in fs],
    output:
        merge_file("{study}", "{point}", "{blocks}"),
    log:
        f"{LOGS}/merge/{{study}}/{{point}}/blocks-{{blocks}}.log",
    threads: config["threads"]["merge"]
    resources:
        mem_mb=point_resources("merge", "mem_mb"),
        runtime=point_resources("merge", "runtime"),
        gpu=point_resources("merge", "gpu"),
    params:
        point=lambda wc: point_of(wc).job_dict("model", "train", "merge"),
        pairs=block_pairs,
        methods=lambda wc: merge_methods(point_of(wc)),
        models=block_models,
        alignment=lambda wc: block_alignments(wc, merge_methods(point_of(wc))),
        device=config["device"],
    script:
        "../scripts/interpolate.py"


rule align:
    """Permutations aligning model B to model A with one method (weight matching, activation matching,
    random permutation) for every seed pair of a pair block, in one safetensors file; objective, iterations
    and time in one row per pair."""
    input:
        data=lambda wc: data_file(point_of(wc).dataset),
        bundles=block_bundles,
    output:
        perms=align_file("{study}", "{point}", "{method}", "{blocks}"),
        rows=align_row_file("{study}", "{point}", "{method}", "{blocks}"),
    log:
        f"{LOGS}/align/{{study}}/{{point}}/{{method}}/blocks-{{blocks}}.log",
    threads: config["threads"]["merge"]
    resources:
        mem_mb=point_resources("merge", "mem_mb"),
        runtime=point_resources("merge", "runtime"),
        gpu=point_resources("merge", "gpu"),
    params:
        point=lambda wc: job_point(wc, "model", "train", merge=["alignment"]),
        pairs=block_pairs,
        models=block_models,
        device=config["device"],
    script:
        "../scripts/align.py"
