# lmcflow: linear mode connectivity studies as Snakemake targets.
# Default run: `snakemake --cores all` (config/config.yaml); another config: --configfile FILE.
from snakemake.utils import min_version

min_version("9.0")

if not config:  # --configfile replaces the default instead of being merged into it
    configfile: f"{workflow.basedir}/config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/merge.smk"
include: "workflow/rules/metrics.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/claims.smk"
include: "workflow/rules/provenance.smk"


localrules:
    all,


rule all:
    input:
        all_targets(),
