rule train:
    """Train seed block {block} of every point of a grid group (most groups are one point) in one job: one stacked
    bundle per set of points whose models stack (init and data order derive from each model's seed). One
    checkpoint and one run row per model."""
    input:
        data=lambda wc: sorted(group_data(wc).values()),
    output:
        directory(bundle_dir("{study}", "{group}", "{block}")),
    log:
        f"{LOGS}/train/{{study}}/{{group}}/bundle-{{block}}.log",
    threads: config["threads"]["train"]
    resources:
        mem_mb=point_resources("train", "mem_mb"),
        runtime=point_resources("train", "runtime", per_model=True),
        gpu=point_resources("train", "gpu"),
    params:
        points=lambda wc: [p.job_dict("model", "train") for p in group_points(wc)],
        bundles=group_stacks,
        models=lambda wc: {
            p.point: {s: model_paths(wc.study, p.point, s) for s in block_seeds(wc)} for p in group_points(wc)
        },
        data=group_data,
        device=config["device"],
        state_dir=f"{WORK}/state",
    script:
        "../scripts/train.py"
