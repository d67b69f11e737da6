localrules:
    claim,
    claims_table,


rule claim:
    """A claim verdict computed from its study's tables (bootstrap CI over seed pairs)."""
    input:
        unpack(claim_study_tables),
        # device and precision of the study's models, for the claim's provenance
        provenance_runs=lambda wc: study_table(CLAIM_CFG[wc.claim]["study"], "runs"),
    output:
        report(f"{RESULTS}/claims/{{claim}}.json", caption="../report/claim.rst", category="claims"),
    log:
        f"{LOGS}/claims/{{claim}}.log",
    wildcard_constraints:
        claim="|".join(CLAIM_CFG) or "NO_CLAIMS",
    params:
        claim=lambda wc: wc.claim,
        claim_cfg=lambda wc: CLAIM_CFG[wc.claim],
        points=lambda wc: [p.to_dict() for p in study_points(POINTS, CLAIM_CFG[wc.claim]["study"])],
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
