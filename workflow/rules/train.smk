rule train:
    """Train one model of a study point with one seed (init and data order derive from the seed)."""
    input:
        data=lambda wc: data_file(point_of(wc).dataset),
    output:
        ckpt=model_file("{study}", "{point}", "{seed}"),
        row=run_row_file("{study}", "{point}", "{seed}"),
    log:
        f"{LOGS}/train/{{study}}/{{point}}/seed-{{seed}}.log",
    params:
        point=lambda wc: point_of(wc).to_dict(),
        device=config["device"],
    threads: config["threads"]["train"]
    resources:
        mem_mb=point_resources("train", "mem_mb", 4000),
        runtime=point_resources("train", "runtime", 60),
        gpu=point_resources("train", "gpu", 0),
    script:
        "../scripts/train.py"
