rule interpolate:
    """Evaluate θ(λ) = (1−λ)θ_A + λθ_B on the λ grid, raw and temperature-calibrated (B permuted by rule
    align's permutations for method ≠ identity)."""
    input:
        data=lambda wc: data_file(point_of(wc).dataset),
        ckpts=lambda wc: [model_file(wc.study, wc.point, s) for s in (wc.seed_a, wc.seed_b)],
        rows=lambda wc: [run_row_file(wc.study, wc.point, s) for s in (wc.seed_a, wc.seed_b)],
        alignment=alignment_inputs,  # [permutations, alignment row] of rule align; none for identity
    output:
        merge_file("{study}", "{point}", "{method}", "{seed_a}", "{seed_b}"),
    log:
        f"{LOGS}/merge/{{study}}/{{point}}/{{method}}/pair-{{seed_a}}-{{seed_b}}.log",
    params:
        point=lambda wc: point_of(wc).to_dict(),
        device=config["device"],
    threads: config["threads"]["merge"]
    resources:
        mem_mb=point_resources("merge", "mem_mb", 4000),
        runtime=point_resources("merge", "runtime", 30),
        gpu=point_resources("merge", "gpu", 0),
    script:
        "../scripts/interpolate.py"


rule align:
    """Permutations aligning model B of a seed pair to model A with one method (weight matching, activation
    matching, random permutation), saved as safetensors; objective, iterations and time in one row."""
    input:
        data=lambda wc: data_file(point_of(wc).dataset),
        ckpts=lambda wc: [model_file(wc.study, wc.point, s) for s in (wc.seed_a, wc.seed_b)],
        rows=lambda wc: [run_row_file(wc.study, wc.point, s) for s in (wc.seed_a, wc.seed_b)],
    output:
        perms=align_file("{study}", "{point}", "{method}", "{seed_a}", "{seed_b}"),
        row=align_row_file("{study}", "{point}", "{method}", "{seed_a}", "{seed_b}"),
    log:
        f"{LOGS}/align/{{study}}/{{point}}/{{method}}/pair-{{seed_a}}-{{seed_b}}.log",
    params:
        point=lambda wc: point_of(wc).to_dict(),
        device=config["device"],
    threads: config["threads"]["merge"]
    resources:
        mem_mb=point_resources("merge", "mem_mb", 4000),
        runtime=point_resources("merge", "runtime", 30),
        gpu=point_resources("merge", "gpu", 0),
    script:
        "../scripts/align.py"
