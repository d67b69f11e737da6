rule train:
    """Train one bundle: the models of a block of seeds of a point, together in one job (init and data order
    derive from each model's seed). One checkpoint and one run row per model in the bundle's directory."""
    input:
        data=lambda wc: data_file(point_of(wc).dataset),
    output:
        directory(bundle_dir("{study}", "{point}", "{block}")),
    log:
        f"{LOGS}/train/{{study}}/{{point}}/bundle-{{block}}.log",
    threads: config["threads"]["train"]
    resources:
        mem_mb=point_resources("train", "mem_mb"),
        runtime=point_resources("train", "runtime", per_model=True),
        gpu=point_resources("train", "gpu"),
    params:
        point=lambda wc: point_of(wc).job_dict("model", "train"),
        seeds=block_seeds,
        device=config["device"],
        state_dir=f"{WORK}/state",
    script:
        "../scripts/train.py"
