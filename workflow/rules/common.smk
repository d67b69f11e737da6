# The run's plan (lmcflow.plan.facade.Plan), built once from the config: its parts are paths, grid (points, grid
# groups, what one job reads), targets and one object per rule family (lmcflow.plan.families). The rule files name
# a function of a part in one hop: PLAN.merge.entries is lmcflow.plan.families.MergeRules.entries;
# lmcflow.plan.ruletable lists every rule's inputs, params, job function and cost.
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

from lmcflow.config import ConfigError
from lmcflow.io import mark_out_of_date
from snakemake.logging import logger
from lmcflow.kernels import kernel_env
from lmcflow.plan import CONCAT_KINDS, RESULT_KINDS, Plan

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
for bundle, missing in PLAN.train.incomplete_bundles().items():
    mark_out_of_date(bundle)
    logger.warning(f"{bundle} lacks {', '.join(Path(f).name for f in missing)}: its train job reruns")

RESULTS, WORK, LOGS = PLAN.paths.results, PLAN.paths.work, PLAN.paths.logs


wildcard_constraints:
    study="[A-Za-z0-9_-]+",
    point="[^/]+",
    group="[^/]+",
    block=r"\d+(s\d+)?",
    blocks=r"\d+(s\d+)?-\d+(s\d+)?",
    method="[a-z_]+",
    dataset="[A-Za-z0-9_-]+",
