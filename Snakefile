# lmcflow: linear mode connectivity studies as Snakemake targets.
# Default run: `snakemake --cores all` (config/config.yaml). Another config: --configfile FILE (its studies
# and claims replace the default's); --config key=value overrides either. See config/README.md.
from snakemake.utils import min_version

min_version("9.0")


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/imported.smk"
include: "workflow/rules/merge.smk"
include: "workflow/rules/tables.smk"
include: "workflow/rules/identifiability.smk"
include: "workflow/rules/mechanism.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/claims.smk"
include: "workflow/rules/provenance.smk"


report: PLAN.targets.report_front_page()


localrules:
    all,


rule all:
    input:
        PLAN.targets.all_targets(),
