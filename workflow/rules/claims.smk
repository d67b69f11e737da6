localrules:
    claim,
    claims_table,


rule claim:
    """A claim verdict computed from its study's tables (seed-level jackknife CI, lmcflow.claims.stats)."""
    input:
        unpack(claim_study_tables),
    output:
        report(f"{RESULTS}/claims/{{claim}}.json", caption="../report/claim.rst", category="claims"),
    log:
        f"{LOGS}/claims/{{claim}}.log",
    wildcard_constraints:
        claim="|".join(CLAIM_CFG) or "NO_CLAIMS",
    params:
        claim=lambda wc: wc.claim,
        claim_cfg=lambda wc: CLAIM_CFG[wc.claim],
        points=claim_points,
    script:
        "../scripts/claim.py"


rule claims_table:
    input:
        [f"{RESULTS}/claims/{c}.json" for c in CLAIM_CFG],
    output:
        f"{RESULTS}/tables/claims.parquet",
    log:
        f"{LOGS}/claims/claims_table.log",
    script:
        "../scripts/claims_table.py"
