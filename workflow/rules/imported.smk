rule import_models:
    """Read seed block {block} of an imported study's checkpoints, each checked against the SHA-256 taken when the
    DAG was built, into the bundle directory rule train writes for a trained study: one checkpoint and one run row
    per model. Nothing trains."""
    input:
        data=PLAN.grid.group_data_files,
        checkpoints=PLAN.imports.files,
    output:
        directory(PLAN.paths.bundle_dir("{study}", "{group}", "{block}")),
    log:
        f"{LOGS}/import_models/{{study}}/{{group}}/bundle-{{block}}.log",
    wildcard_constraints:
        study=PLAN.imports.imported_studies(),
    threads: config["threads"]["train"]
    params:
        point=PLAN.imports.point,
        models=PLAN.imports.models,
        sources=PLAN.imports.sources,
        device=config["device"],
    script:
        "../scripts/import_models.py"
