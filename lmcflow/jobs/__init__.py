"""One module per workflow stage, one function per job: Snakemake ``script:`` files unpack
``snakemake.input/output/params`` and call one of these. ``report`` and ``figures`` (table, claim and figure
jobs) import no torch; this package's ``__init__`` imports nothing."""
