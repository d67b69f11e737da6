rule train:
    """Train seed block {block} of every point of a grid group (most groups are one point) in one job: one stacked
    bundle per set of points whose models stack (init and data order derive from each model's seed). One
    checkpoint and one run row per model."""
    input:
        data=PLAN.grid.group_data_files,
    output:
        directory(PLAN.paths.bundle_dir("{study}", "{group}", "{block}")),
    log:
        f"{LOGS}/train/{{study}}/{{group}}/bundle-{{block}}.log",
    wildcard_constraints:
        study=PLAN.imports.trained_studies(),
    threads: config["threads"]["train"]
    resources:
        mem_mb=PLAN.resources("train", "mem_mb"),
        runtime=PLAN.resources("train", "runtime"),
        gpu=PLAN.resources("train", "gpu"),
    params:
        points=PLAN.train.points,
        bundles=PLAN.train.bundles,
        models=PLAN.train.models,
        data=PLAN.grid.group_data,
        device=config["device"],
        state_dir=f"{WORK}/state",
        stack_alone=PLAN.train.stack_alone,
    script:
        "../scripts/train.py"
