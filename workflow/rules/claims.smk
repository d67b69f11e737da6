localrules:
    claim,
    claims_table,
    report_front_page,


rule claim:
    """A claim verdict computed from its study's tables (seed-level jackknife CI, lmcflow.claims.stats)."""
    input:
        # the claim's tables, and its studies' runs tables (device and precision, for the claim's provenance)
        unpack(claim_inputs),
    output:
        report(claim_file("{claim}"), caption="../report/claim.rst", category="claims"),
    log:
        f"{LOGS}/claims/{{claim}}.log",
    wildcard_constraints:
        claim="|".join(CLAIM_CFG) or "NO_CLAIMS",
    params:
        claim=lambda wc: wc.claim,
        claim_cfg=claim_params_cfg,
        points=claim_points,
        datasets=claim_datasets,
    script:
        "../scripts/claim.py"


rule claims_table:
    input:
        claims_table_inputs(),
    output:
        CLAIMS_TABLE,
    log:
        f"{LOGS}/claims/claims_table.log",
    script:
        "../scripts/claims_table.py"


rule report_front_page:
    """The report's landing text: every verdict beside the paper's number, with links to the figures."""
    input:
        CLAIMS_TABLE,
    output:
        FRONT_PAGE,
    log:
        f"{LOGS}/claims/report_front_page.log",
    params:
        studies=STUDIES,
    script:
        "../scripts/report_front_page.py"
