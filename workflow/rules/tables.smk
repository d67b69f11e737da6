localrules:
    study_table,
    study_barriers,
    result_table,
    paper_table1,


rule study_table:
    """One study's per-job rows (training runs, interpolation curves, alignments, layer metrics, identifiability
    pairs, swap costs) concatenated into a typed table."""
    input:
        study_table_inputs,
    output:
        study_table("{study}", "{kind}"),
    log:
        f"{LOGS}/tables/{{study}}/{{kind}}.log",
    wildcard_constraints:
        kind="|".join(CONCAT_KINDS),
    params:
        kind=lambda wc: wc.kind,
        files=study_table_params_files,
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
        result_table_files,
    output:
        result_table("{kind}"),
    log:
        f"{LOGS}/tables/all_{{kind}}.log",
    wildcard_constraints:
        kind="|".join(RESULT_KINDS),
    params:
        kind=lambda wc: wc.kind,
        files=result_table_files,
    script:
        "../scripts/concat_table.py"


rule paper_table1:
    """The width paper's Table 1 beside ours: midpoint test error barrier at each width study's widest width, plain
    average and weight matching, seed-level CI, the paper's value beside it (lmcflow.paper_table1); and its figure."""
    input:
        table1_inputs,
    output:
        table=TABLE1_TABLE,
        png=report(TABLE1_FIGURES[0], caption="../report/paper_table1.rst", category="Table 1"),
        pdf=TABLE1_FIGURES[1],
    log:
        f"{LOGS}/tables/paper_table1.log",
    params:
        studies=table1_studies(),
    script:
        "../scripts/paper_table1.py"
