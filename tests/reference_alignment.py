"""The straightforward weight-matching coordinate descent (every group's full cost recomputed in every sweep):
the reference that ``lmcflow.alignment.weight_matching`` must reproduce (tests/test_alignment.py) and beat
(benchmarks/bench_weight_matching.py)."""
from __future__ import annotations

import torch
from scipy.optimize import linear_sum_assignment

from lmcflow.alignment.spec import permute_except
from lmcflow.seeding import generator


@torch.no_grad()
def reference_weight_matching(spec, sd_a: dict, sd_b: dict, max_iter: int = 100, seed: int = 0) -> tuple[dict, list]:
    """(perms, objective history) of Git Re-Basin weight matching in float64, the same group order and step rule
    as lmcflow's (docs/internals.md), with no caching."""
    keys = spec.parameters
    wa = {k: sd_a[k].double() for k in keys}
    wb = {k: sd_b[k].double() for k in keys}
    members = {g: [(k, ax) for k, ax in spec.members[g] if k in set(keys)] for g in spec.groups}
    groups = [g for g in spec.groups if members[g]]
    perms = {g: torch.arange(n) for g, n in spec.sizes.items()}

    def objective() -> float:
        return float(sum((wa[k] * permute_except(wb[k], spec.axes[k], perms, -1)).sum() for k in keys))

    gen = generator("weight_matching", seed)
    history = [objective()]
    for _ in range(max_iter):
        improved = False
        for gi in torch.randperm(len(groups), generator=gen).tolist():
            grp = groups[gi]
            n = spec.sizes[grp]
            cost = torch.zeros(n, n, dtype=torch.float64)
            for k, axis in members[grp]:
                a = wa[k].movedim(axis, 0).reshape(n, -1)
                b = permute_except(wb[k], spec.axes[k], perms, axis).movedim(axis, 0).reshape(n, -1)
                cost += a @ b.T
            _, col = linear_sum_assignment(cost.numpy(), maximize=True)
            new = torch.as_tensor(col, dtype=torch.long)
            rows = torch.arange(n)
            old_score, new_score = float(cost[rows, perms[grp]].sum()), float(cost[rows, new].sum())
            if new_score > old_score + 1e-12 * max(1.0, abs(old_score)):
                perms[grp] = new
                improved = True
        history.append(objective())
        if not improved:
            break
    return perms, history
