localrules:
    study_table,
    study_barriers,
    result_table,


rule study_table:
    """One study's per-job rows concatenated into a typed table."""
    input:
        lambda wc: study_inputs(wc.study, wc.kind),
    output:
        study_table("{study}", "{kind}"),
    log:
        f"{LOGS}/tables/{{study}}/{{kind}}.log",
    wildcard_constraints:
        kind="runs|interpolation",
    params:
        kind=lambda wc: wc.kind,
    script:
        "../scripts/concat_table.py"


rule study_barriers:
    """Barriers (three definitions, raw and calibrated) from a study's interpolation curves."""
    input:
        study_table("{study}", "interpolation"),
    output:
        study_table("{study}", "barriers"),
    log:
        f"{LOGS}/tables/{{study}}/barriers.log",
    script:
        "../scripts/barriers.py"


rule result_table:
    """All studies' tables in one file under results/tables/."""
    input:
        lambda wc: [study_table(s, wc.kind) for s in STUDIES],
    output:
        f"{RESULTS}/tables/{{kind}}.parquet",
    log:
        f"{LOGS}/tables/all_{{kind}}.log",
    wildcard_constraints:
        kind="runs|interpolation|barriers",
    params:
        kind=lambda wc: wc.kind,
    script:
        "../scripts/concat_table.py"
