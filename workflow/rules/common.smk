# The run's plan (lmcflow.plan: points, paths, targets, each rule's inputs, params and resources), built once
# from the config, and its functions under the names the rule files use.
import os
import sys
from pathlib import Path

# The lmcflow of this checkout, for the DAG and for every job (script: processes and cluster jobs
# inherit the environment), whatever venv is active: two clones sharing one venv never mix code. The checkout is
# the folder above this file's (workflow.basedir is another workflow's when lmcflow runs as its module, as
# `snakedeploy deploy-workflow` sets it up); a module read from GitHub has no local checkout, and then the
# installed lmcflow is used.
_HERE = Path(str(workflow.current_basedir))
CHECKOUT = str(_HERE.parents[1]) if _HERE.is_dir() else None
if CHECKOUT is not None:
    sys.path.insert(0, CHECKOUT)
    os.environ.update(
        PYTHONPATH=os.pathsep.join(
            [CHECKOUT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != CHECKOUT]
        )
    )

from lmcflow.config import ConfigError, canonical
from lmcflow.io import mark_out_of_date
from snakemake.logging import logger
from lmcflow.kernels import kernel_env
from lmcflow.plan import CONCAT_KINDS, RESULT_KINDS, Plan
from lmcflow.plan.rules import IDENT_ANALYSIS_KEYS

try:
    # The embedded default or the --configfile file(s), with --config overrides on top; defaults from the schema.
    # workflow.configfiles: --configfile files, and a deployment's `configfile:` (the config it passes as a module)
    PLAN = Plan.from_files(
        workflow.configfiles,
        workflow.config_settings.config,
        default_path=Path(CHECKOUT or Path(workflow.configfiles[0]).parent.parent) / "config/config.yaml",
    )
    # Every job inherits this environment: its CPU kernels are chosen before it imports torch.
    os.environ.update(kernel_env(PLAN.config["cpu_kernels"]))
except ConfigError as err:
    raise WorkflowError(f"Invalid config: {err}") from None
config.clear()
config.update(PLAN.config)

# A bundle directory without all its checkpoints and run rows (one deleted as damaged) is not a finished
# output: Snakemake sees only the directory, so date it before its inputs and its train job reruns.
for bundle, missing in PLAN.incomplete_bundles().items():
    mark_out_of_date(bundle)
    logger.warning(f"{bundle} lacks {', '.join(Path(f).name for f in missing)}: its train job reruns")

RESULTS, WORK, LOGS = PLAN.results, PLAN.work, PLAN.logs
CLAIM_CFG = PLAN.claim_cfg
STUDIES = PLAN.studies
TABLE1_TABLE, TABLE1_FIGURES = PLAN.table1_table, PLAN.table1_figures
FRONT_PAGE, PROVENANCE_FILES, CLAIMS_TABLE = PLAN.front_page, PLAN.provenance_files, PLAN.claims_table


wildcard_constraints:
    study="[A-Za-z0-9_-]+",
    point="[^/]+",
    group="[^/]+",
    block=r"\d+(s\d+)?",
    blocks=r"\d+(s\d+)?-\d+(s\d+)?",
    method="[a-z_]+",
    dataset="[A-Za-z0-9_-]+",


# paths
data_file = PLAN.data_file
bundle_dir = PLAN.bundle_dir
merge_file = PLAN.merge_file
study_table = PLAN.study_table
result_table = PLAN.result_table
claim_file = PLAN.claim_file
ident_point_file = PLAN.ident_point_file
align_file = PLAN.align_file
align_row_file = PLAN.align_row_file
mechanism_file = PLAN.mechanism_file
active_overlap_file = PLAN.active_overlap_file
merge_many_file = PLAN.merge_many_file
# targets
all_targets = PLAN.all_targets
report_front_page = PLAN.report_front_page
table1_studies = PLAN.table1_studies
# inputs, params and resources of the rules' jobs (functions of the wildcards)
point_resources = PLAN.resources
group_data = PLAN.group_data
group_data_files = PLAN.group_data_files
point_data_file = PLAN.point_data_file
block_bundles = PLAN.block_bundles
block_pairs = PLAN.block_pairs
block_models = PLAN.block_models
train_points = PLAN.train_points
train_stacks = PLAN.train_stacks
train_models = PLAN.train_models
train_stack_alone = PLAN.train_stack_alone
merge_entries = PLAN.merge_entries
merge_alignment_files = PLAN.merge_alignment_files
align_point = PLAN.align_point
mechanism_point = PLAN.mechanism_point
many_point = PLAN.many_point
many_models = PLAN.many_models
many_bundles = PLAN.many_bundles
mechanism_alignment_files = PLAN.mechanism_alignment_files
mechanism_alignment = PLAN.mechanism_alignment
identity_paths_file = PLAN.identity_paths_file
ident_points = PLAN.ident_points
swap_points = PLAN.swap_points
coherence_data_files = PLAN.coherence_data_files
coherence_points = PLAN.coherence_points
coherence_data_paths = PLAN.coherence_data_paths
study_table_inputs = PLAN.study_table_inputs
study_table_params_files = PLAN.study_table_params_files
result_table_files = PLAN.result_table_files
result_table_outputs = PLAN.result_table_outputs
table1_inputs = PLAN.table1_inputs
claim_inputs = PLAN.claim_inputs
claim_params_cfg = PLAN.claim_params_cfg
claim_points = PLAN.claim_points
claim_datasets = PLAN.claim_datasets
claims_table_inputs = PLAN.claims_table_inputs
prepare_data_cfg = PLAN.prepare_data_cfg
# studies of imported checkpoints (lmcflow.plan.imported)
TRAINED_STUDIES, IMPORTED_STUDIES = PLAN.imports.trained_studies(), PLAN.imports.imported_studies()
import_point = PLAN.import_point
import_models = PLAN.import_models
import_sources = PLAN.import_sources
import_files = PLAN.import_files
imported_provenance = PLAN.imported_provenance
prepare_data_runtime = PLAN.prepare_data_runtime
