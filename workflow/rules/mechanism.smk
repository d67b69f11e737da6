rule mechanism:
    """LEWC/LLFC, weak additivity, reciprocal orthogonality, low rank and neuron activity of every seed pair of a
    pair block (B permuted by the method's alignment), per hidden layer on the λ grid; and the active-unit overlap
    at every τ of analysis.mechanism.active_thresholds."""
    input:
        data=point_data_file,
        bundles=block_bundles,
        alignment=mechanism_alignment_files,
    output:
        layer_metrics=mechanism_file("{study}", "{point}", "{method}", "{blocks}"),
        active_overlap=active_overlap_file("{study}", "{point}", "{method}", "{blocks}"),
    log:
        f"{LOGS}/mechanism/{{study}}/{{point}}/{{method}}/blocks-{{blocks}}.log",
    threads: config["threads"]["merge"]
    resources:
        mem_mb=point_resources("mechanism", "mem_mb"),
        runtime=point_resources("mechanism", "runtime"),
        gpu=point_resources("mechanism", "gpu"),
    params:
        point=mechanism_point,
        pairs=block_pairs,
        models=block_models,
        alignment=mechanism_alignment,
        device=config["device"],
    script:
        "../scripts/mechanism.py"
