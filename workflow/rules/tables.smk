localrules:
    study_barriers,
    paper_table1,


# One rule per table kind, its kind written in its output path: no wildcard for it to share with the rules of
# barriers, coherence, claims and Table 1, which write files beside these.
for kind in CONCAT_KINDS:

    rule:
        """One study's per-job rows (training runs, interpolation curves, alignments, layer metrics,
        identifiability pairs, swap costs) of one kind concatenated into a typed table."""
        name:
            f"study_table_{kind}"
        input:
            PLAN.tables.study_inputs(kind),
        output:
            PLAN.paths.study_table("{study}", kind),
        log:
            f"{LOGS}/tables/{{study}}/{kind}.log",
        localrule: True
        params:
            kind=kind,
            files=PLAN.tables.study_files(kind),
        script:
            "../scripts/concat_table.py"


rule study_barriers:
    """Barriers (three definitions, raw and calibrated) from a study's interpolation curves."""
    input:
        PLAN.paths.study_table("{study}", "interpolation"),
    output:
        PLAN.paths.study_table("{study}", "barriers"),
    log:
        f"{LOGS}/tables/{{study}}/barriers.log",
    script:
        "../scripts/barriers.py"


for kind in RESULT_KINDS:

    rule:
        """All studies' tables of one kind under results/tables/: real pairs without REPAIR in <kind>.parquet, the
        null partners' and REPAIR'd rows (where the config has them) in null_partners/ and repair/."""
        name:
            f"result_table_{kind}"
        input:
            PLAN.tables.result_files(kind),
        output:
            **PLAN.tables.result_outputs(kind),
        log:
            f"{LOGS}/tables/all_{kind}.log",
        localrule: True
        params:
            kind=kind,
            files=PLAN.tables.result_files(kind),
        script:
            "../scripts/result_table.py"


rule paper_table1:
    """The width paper's Table 1 beside ours: midpoint test error barrier at each width study's widest width, plain
    average and weight matching, seed-level CI, the paper's value beside it (lmcflow.paper_table1); and its figure."""
    input:
        PLAN.tables.table1_inputs,
    output:
        table=PLAN.paths.table1_table,
        png=report(PLAN.paths.table1_figures[0], caption="../report/paper_table1.rst", category="Table 1"),
        pdf=PLAN.paths.table1_figures[1],
    log:
        f"{LOGS}/tables/paper_table1.log",
    params:
        studies=PLAN.targets.table1_studies(),
    script:
        "../scripts/paper_table1.py"
