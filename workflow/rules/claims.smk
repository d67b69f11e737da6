from lmcflow.claims.gates import dataset_facts


localrules:
    claim,
    claims_table,
    report_front_page,


rule claim:
    """A claim verdict computed from its study's tables (seed-level jackknife CI, lmcflow.claims.stats)."""
    input:
        unpack(claim_study_tables),
        # device and precision of the studies' models, for the claim's provenance
        provenance_runs=lambda wc: [study_table(s, "runs") for s in claim_studies(CLAIM_CFG[wc.claim])],
    output:
        report(f"{RESULTS}/claims/{{claim}}.json", caption="../report/claim.rst", category="claims"),
    log:
        f"{LOGS}/claims/{{claim}}.log",
    wildcard_constraints:
        claim="|".join(CLAIM_CFG) or "NO_CLAIMS",
    params:
        claim=lambda wc: wc.claim,
        claim_cfg=lambda wc: canonical(CLAIM_CFG[wc.claim]),
        points=claim_points,
        # classes (the endpoint gate's chance level), d and n_train of the claim's datasets
        datasets=lambda wc: dataset_facts({p["dataset"] for p in claim_points(wc)}, config.get("data")),
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


rule report_front_page:
    """The report's landing text: every verdict beside the paper's number, with links to the figures."""
    input:
        f"{RESULTS}/tables/claims.parquet",
    output:
        FRONT_PAGE,
    log:
        f"{LOGS}/claims/report_front_page.log",
    params:
        studies=STUDIES,
    script:
        "../scripts/report_front_page.py"
