rule prepare_data:
    """Read a dataset once (torchvision or a synthetic generator), split off validation, normalise."""
    output:
        PLAN.paths.data_file("{dataset}"),
    log:
        f"{LOGS}/prepare_data/{{dataset}}.log",
    resources:
        mem_mb=8000,
        runtime=PLAN.data.runtime,
    params:
        data_cfg=PLAN.data.cfg,
        cache_root=f"{WORK}/data/raw",
    script:
        "../scripts/prepare_data.py"
