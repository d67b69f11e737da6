localrules:
    provenance,


rule provenance:
    """The lmcflow commit and version, torch version and math libraries, devices, precisions, CPU kernels and thread counts that produced the results."""
    input:
        runs=PLAN.paths.result_table("runs"),
    output:
        json=PLAN.paths.provenance_files[0],
        html=report(PLAN.paths.provenance_files[1], caption="../report/provenance.rst", category="provenance"),
    log:
        f"{LOGS}/provenance.log",
    params:
        imported=PLAN.imports.provenance(),
    script:
        "../scripts/provenance.py"
