rule import_models:
    """Read seed block {block} of an imported study's checkpoints, each checked against the SHA-256 taken when the
    DAG was built, into the bundle directory rule train writes for a trained study: one checkpoint and one run row
    per model. Nothing trains."""
    input:
        data=group_data_files,
        checkpoints=import_files,
    output:
        directory(bundle_dir("{study}", "{group}", "{block}")),
    log:
        f"{LOGS}/import_models/{{study}}/{{group}}/bundle-{{block}}.log",
    wildcard_constraints:
        study=IMPORTED_STUDIES,
    threads: config["threads"]["train"]
    params:
        point=import_point,
        models=import_models,
        sources=import_sources,
        device=config["device"],
    script:
        "../scripts/import_models.py"
