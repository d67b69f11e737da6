rule train:
    """Train seed block {block} of every point of a grid group (most groups are one point) in one job: one stacked
    bundle per set of points whose models stack (init and data order derive from each model's seed). One
    checkpoint and one run row per model."""
    input:
        data=group_data_files,
    output:
        directory(bundle_dir("{study}", "{group}", "{block}")),
    log:
        f"{LOGS}/train/{{study}}/{{group}}/bundle-{{block}}.log",
    wildcard_constraints:
        study=TRAINED_STUDIES,
    threads: config["threads"]["train"]
    resources:
        mem_mb=point_resources("train", "mem_mb"),
        runtime=point_resources("train", "runtime"),
        gpu=point_resources("train", "gpu"),
    params:
        points=train_points,
        bundles=train_stacks,
        models=train_models,
        data=group_data,
        device=config["device"],
        state_dir=f"{WORK}/state",
        stack_alone=train_stack_alone,
    script:
        "../scripts/train.py"
