localrules:
    claim,
    claims_table,
    report_front_page,


rule claim:
    """A claim verdict computed from its study's tables (seed-level jackknife CI, lmcflow.claims.stats)."""
    input:
        # the claim's tables, and its studies' runs tables (device and precision, for the claim's provenance)
        unpack(PLAN.claims.inputs),
    output:
        report(PLAN.paths.claim_file("{claim}"), caption="../report/claim.rst", category="claims"),
    log:
        f"{LOGS}/claims/{{claim}}.log",
    wildcard_constraints:
        claim="|".join(PLAN.claims.names()) or "NO_CLAIMS",
    params:
        claim=lambda wc: wc.claim,
        claim_cfg=PLAN.claims.cfg,
        points=PLAN.claims.points,
        datasets=PLAN.claims.datasets,
    script:
        "../scripts/claim.py"


rule claims_table:
    input:
        PLAN.claims.table_inputs(),
    output:
        PLAN.paths.claims_table,
    log:
        f"{LOGS}/claims/claims_table.log",
    script:
        "../scripts/claims_table.py"


rule report_front_page:
    """The report's landing text: every verdict beside the paper's number, with links to the figures."""
    input:
        PLAN.paths.claims_table,
    output:
        PLAN.paths.front_page,
    log:
        f"{LOGS}/claims/report_front_page.log",
    params:
        studies=PLAN.grid.studies,
    script:
        "../scripts/report_front_page.py"
