"""``Plan``: a run's DAG as data, composed of one small object per concern. The rule files name a function of
one of them in one hop (``PLAN.<part>.<function>``):

- ``paths``: where every file lives (``lmcflow.plan.paths.Paths``);
- ``grid``: points, grid groups, seed blocks and what one job of them reads (``lmcflow.plan.grid.Grid``);
- ``targets``: what each study's tables concatenate, figures, claims' tables, rule all's inputs
  (``lmcflow.plan.targets.Targets``);
- one object per rule family, each rule's inputs and params (``lmcflow.plan.families``): ``data``, ``train``,
  ``imports`` (``lmcflow.plan.imported``), ``merge``, ``mechanism``, ``ident``, ``tables``, ``claims``;
- ``resources``: each compute job's request, from the rule table's cost column (``lmcflow.plan.ruletable``).
"""
from __future__ import annotations

from lmcflow.config import resolve_config
from lmcflow.plan.families import (
    ClaimRules,
    DataRules,
    IdentRules,
    MechanismRules,
    MergeRules,
    TableRules,
    TrainRules,
)
from lmcflow.plan.grid import build_grid
from lmcflow.plan.imported import Imports
from lmcflow.plan.requests import GROUP_BLOCK, GROUP_PAIR, POINT, Compute
from lmcflow.plan.ruletable import RULES
from lmcflow.plan.targets import Targets


class Plan:
    """The parts of a run's plan (module doc), each built from finished ones."""

    def __init__(self, config: dict, default_front_page: str = "workflow/report/workflow.rst",
                 enforce_limits: bool = True):
        """``config``: a resolved config (``resolve_config``); raises ``ConfigError`` where it is invalid, or
        (``enforce_limits``) where a job cannot fit ``cluster.max_runtime`` / ``cluster.max_mem_mb``."""
        self.config = config
        self.grid = build_grid(config, enforce_limits)
        self.paths = self.grid.paths
        self.targets = Targets(self.grid, default_front_page)
        self.imports = Imports(config, self.grid)  # studies of imported checkpoints
        self.data = DataRules(self.grid)
        self.train = TrainRules(self.grid)
        self.merge = MergeRules(self.grid)
        self.mechanism = MechanismRules(self.grid)
        self.ident = IdentRules(self.grid)
        self.tables = TableRules(self.targets)
        self.claims = ClaimRules(self.targets)
        self._requests: dict = {}

    @classmethod
    def from_files(cls, configfiles=(), overrides=None, default_path=None, **kwargs):
        """The plan of a run given ``--configfile`` files (none: the embedded default) and ``--config``
        overrides."""
        extra = {} if default_path is None else {"default_path": default_path}
        return cls(resolve_config(list(configfiles), overrides, **extra), **kwargs)

    # ----------------------------------------------------------------------- resources
    def job_request(self, rule: str, wc):
        """The ``lmcflow.plan.requests.Request`` of one job of the compute rule ``rule``."""
        key = (rule, *(str(getattr(wc, k, "")) for k in ("study", "group", "point", "method", "block", "blocks")))
        if key not in self._requests:
            self._requests[key] = self._request(RULES[rule].cost, wc)
        return self._requests[key]

    def _request(self, c: Compute, wc):
        g = self.grid
        if c.unit == GROUP_BLOCK:
            return c.request(g.group_points(wc), len(g.block_seeds(wc)), self.config)
        if c.unit == POINT:
            return c.request([g.point_of(wc)], 0, self.config)
        if c.unit == GROUP_PAIR:
            return c.request(g.group_points(wc), len(g.block_pairs(wc)), self.config)
        return c.request([g.point_of(wc)], len(g.block_pairs(wc)), self.config, wc.method)

    def resources(self, rule: str, key: str):
        """A resource of ``rule``'s jobs (``runtime`` in minutes, ``mem_mb``, ``gpu``) as a function of the
        wildcards: the job's ``job_request``. Resources are not params: a changed estimate reruns nothing."""
        return lambda wc: getattr(self.job_request(rule, wc), key)
