localrules:
    provenance,


rule provenance:
    """The lmcflow commit and version, torch version and math libraries, devices, precisions, CPU kernels and thread counts that produced the results."""
    input:
        runs=result_table("runs"),
    output:
        json=PROVENANCE_FILES[0],
        html=report(PROVENANCE_FILES[1], caption="../report/provenance.rst", category="provenance"),
    log:
        f"{LOGS}/provenance.log",
    params:
        imported=imported_provenance(),
    script:
        "../scripts/provenance.py"
