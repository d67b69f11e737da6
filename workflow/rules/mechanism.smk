rule mechanism:
    """LEWC/LLFC, weak additivity, reciprocal orthogonality, low rank and neuron activity of every seed pair of a
    pair block (B permuted by the method's alignment), per hidden layer on the λ grid; and the active-unit overlap
    at every τ of analysis.mechanism.active_thresholds."""
    input:
        data=PLAN.grid.point_data_file,
        bundles=PLAN.grid.block_bundles,
        alignment=PLAN.mechanism.alignment_files,
    output:
        layer_metrics=PLAN.paths.mechanism_file("{study}", "{point}", "{method}", "{blocks}"),
        active_overlap=PLAN.paths.active_overlap_file("{study}", "{point}", "{method}", "{blocks}"),
    log:
        f"{LOGS}/mechanism/{{study}}/{{point}}/{{method}}/blocks-{{blocks}}.log",
    threads: config["threads"]["merge"]
    resources:
        mem_mb=PLAN.resources("mechanism", "mem_mb"),
        runtime=PLAN.resources("mechanism", "runtime"),
        gpu=PLAN.resources("mechanism", "gpu"),
    params:
        point=PLAN.mechanism.point,
        pairs=PLAN.grid.block_pairs,
        models=PLAN.grid.block_models,
        alignment=PLAN.mechanism.alignment,
        device=config["device"],
    script:
        "../scripts/mechanism.py"
