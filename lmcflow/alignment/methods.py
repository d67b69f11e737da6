"""Alignment methods: permutations of model B that align it to model A (``align``: identity, weight matching,
activation matching, random permutation).

Details: docs/internals.md, "`lmcflow.alignment.methods`".
"""
from __future__ import annotations

import time

import lapjv
import numpy as np
import torch
from scipy.optimize import linear_sum_assignment
from torch import nn

from lmcflow.alignment.derive import node_feature_moments
from lmcflow.alignment.heads import complete, draw, head_step, ties
from lmcflow.alignment.spec import PermutationSpec, permutation_spec, permute_except
from lmcflow.correlation import feature_correlations
from lmcflow.seeding import generator

METHODS = ("identity", "weight_matching", "activation_matching", "random_permutation")
WM_INITS = ("identity", "forward")  # weight matching's start (merge.alignment.init; docs/internals.md)
WM_SOLVERS = ("lapjv", "scipy")  # weight matching's assignment step (docs/internals.md)


def weight_matching_objective(spec: PermutationSpec, sd_a: dict, sd_b: dict, perms: dict,
                              keys=None) -> float:
    """J(P) = Σ_k <W_a[k], π_P(W_b[k])> in float64 over ``keys`` (default: trainable parameters)."""
    keys = spec.parameters if keys is None else keys
    total = 0.0
    for k in keys:
        a = sd_a[k].double()
        b = permute_except(sd_b[k].double(), spec.axes[k], {g: p.to(a.device) for g, p in perms.items()}, -1)
        total += float((a * b).sum())
    return total


def identity(spec: PermutationSpec) -> tuple[dict, dict]:
    perms = {g: torch.arange(n) for g, n in spec.sizes.items()}
    return perms, {"objective": float("nan"), "iterations": 0, "seconds": 0.0}


def random_permutation(spec: PermutationSpec, seed: int) -> tuple[dict, dict]:
    """Independent uniform permutation per group, from ``generator("random_permutation", seed)``; attention heads:
    a uniform permutation of the heads and within each head (``lmcflow.alignment.heads.draw``)."""
    t0 = time.perf_counter()
    perms = draw(spec, generator("random_permutation", seed))
    return perms, {"objective": float("nan"), "iterations": 0, "seconds": time.perf_counter() - t0}


class _CostTerm:
    """One member (key, axis) of a group's assignment cost, ``A_k · π(B_k)ᵀ`` over the other axes, where B_k's
    other permuted axes are re-indexed by the current permutations. The value is cached; when one other group's
    permutation moved fewer than half its units since the last call, only the moved slices are recomputed
    (``value += A_S · (B_new − B_old)_Sᵀ``), which makes the late sweeps, where few units move, cheap."""

    def __init__(self, a: torch.Tensor, b: torch.Tensor, axis: int, groups: tuple):
        self.a, self.b, self.axis = a, b, axis
        self.others = [(j, g) for j, g in enumerate(groups) if g is not None and j != axis]
        self.value = None
        self.seen: dict = {}

    def _flat(self, t: torch.Tensor) -> torch.Tensor:
        return t.movedim(self.axis, 0).reshape(t.shape[self.axis], -1)

    def _permuted(self, t: torch.Tensor, perms: dict, skip: int) -> torch.Tensor:
        for j, g in self.others:
            if j != skip:
                t = t.index_select(j, perms[g])
        return t

    def current(self, perms: dict) -> tuple[torch.Tensor, bool]:
        """(the term's cost matrix under ``perms``, whether it changed since the last call)."""
        if self.value is not None:
            moved = [(j, g, torch.nonzero(perms[g] != self.seen[g]).flatten()) for j, g in self.others]
            moved = [m for m in moved if len(m[2])]
            if not moved:
                return self.value, False
            if len(moved) == 1 and 2 * len(moved[0][2]) < self.b.shape[moved[0][0]]:
                j, g, rows = moved[0]
                delta = self.b.index_select(j, perms[g][rows]) - self.b.index_select(j, self.seen[g][rows])
                delta = self._permuted(delta, perms, j)
                self.value += self._flat(self.a.index_select(j, rows)) @ self._flat(delta).T
                self.seen[g] = perms[g].clone()
                return self.value, True
        self.value = self._flat(self.a) @ self._flat(self._permuted(self.b, perms, -1)).T
        self.seen = {g: perms[g].clone() for _, g in self.others}
        return self.value, True


class _Assignment:
    """The sweeps' assignment step, ``argmax_π Σ_i C[i, π(i)]`` per group. ``scipy``: scipy's
    ``linear_sum_assignment`` on the float64 cost (the reference). ``lapjv``: PyPI lapjv's Jonker–Volgenant
    (AVX2) on the cost rounded to float32, warm-started from the group's previous dual values (the problem is
    solved on the reduced cost ``−C − u − v``, which has the same optimum; the duals returned are added on).
    Where the float64 optimum leads every other assignment by more than float32 resolves, both give it; the
    caller accepts a step only when it raises the cost as computed (float64 by default), so J never drops."""

    def __init__(self, solver: str):
        self.solver = solver
        self.duals: dict = {}

    def __call__(self, grp: str, cost: torch.Tensor) -> torch.Tensor:
        c = cost.cpu().numpy()
        if self.solver == "scipy" or len(c) < 2:
            return torch.as_tensor(linear_sum_assignment(c, maximize=True)[1], dtype=torch.long)
        m = np.negative(c, dtype=np.float32)
        u, v = self.duals.get(grp, (None, None))
        if u is not None:
            m -= u[:, None]
            m -= v[None, :]
        col, _, (_, du, dv) = lapjv.lapjv(m)
        self.duals[grp] = (du, dv) if u is None else (u + du, v + dv)
        return torch.as_tensor(col, dtype=torch.long)


class _Ties:
    """Weight matching's attention heads (``lmcflow.alignment.heads``): each tie is one step over all its head
    groups, whose cost is their own terms plus their segments of stacked groups' terms (q and k rows of a
    packed ``in_proj_weight`` both count for the q/k group); ``head_step`` solves it exactly."""

    def __init__(self, spec: PermutationSpec, terms: dict):
        self.spec, self.terms = spec, terms
        self.groups = ties(spec)
        self.segments: dict = {g: [] for g in spec.heads}
        for s, parts in spec.stacks.items():
            start = 0
            for part, n in parts:
                if part is not None:
                    self.segments[part].append((s, start, n))
                start += n

    def parts(self, tie: str) -> list:
        """[(head group, cost term, (start, n) of its segment or None)] of a tie."""
        out = []
        for g in self.groups[tie]:
            out += [(g, t, None) for t in self.terms[g]]
            out += [(g, t, (o, n)) for s, o, n in self.segments[g] for t in self.terms[s]]
        return out

    def step(self, tie: str, perms: dict, parts: list) -> bool:
        """Set the tie's permutations where ``head_step`` raises their cost; whether it did."""
        costs = {}
        for g, t, seg in parts:
            value = t.current(perms)[0]
            block = value if seg is None else value[seg[0]:seg[0] + seg[1], seg[0]:seg[0] + seg[1]]
            costs[g] = costs[g] + block if g in costs else block.clone()
        if not costs:
            return False
        new = head_step({g: c.double().cpu().numpy() for g, c in costs.items()}, self.spec.heads[g][1])

        def score(p: dict) -> float:
            return sum(float(c[torch.arange(len(c), device=c.device), p[g].to(c.device)].sum())
                       for g, c in costs.items())
        device = next(iter(costs.values())).device
        new = {g: p.to(device) for g, p in new.items()}
        if score(new) <= score(perms) + 1e-12 * max(1.0, abs(score(perms))):
            return False
        perms.update(new)
        perms.update(complete(self.spec, perms))
        return True


@torch.no_grad()
def _forward_start(groups: list, terms: dict, perms: dict, device, assign: _Assignment,
                   heads: _Ties | None = None) -> None:
    """``perms`` set in place, group by group, from only the cost terms whose other permuted axes are already
    set: first the groups with a term that no other group touches (a first layer's weight, whose other axis is
    the input's), then each group such a set group makes exact, until no group has one (those keep the
    identity); an attention's head groups are set together, by ``_Ties.step`` on their ready terms. Where B is a
    permuted copy of A, every term used is exact and this recovers the permutation; the sweeps then start from
    it."""
    done, pending = set(), list(groups) + list(heads.groups if heads else ())
    stacks = heads.spec.stacks if heads else {}

    def ready_terms(u):
        parts = heads.parts(u) if heads and u in heads.groups else [(u, t, None) for t in terms[u]]
        return [p for p in parts if all(o in done for _, o in p[1].others)]

    while pending:
        ready = next((u for u in pending if ready_terms(u)), None)
        if ready is None:
            return
        use = ready_terms(ready)
        if heads and ready in heads.groups:
            heads.step(ready, perms, use)
            done.update(heads.groups[ready])
            done.update(s for s, parts in stacks.items() if all(p is None or p in done for p, _ in parts))
        else:
            cost = use[0][1].current(perms)[0].clone()
            for _, t, _ in use[1:]:
                cost += t.current(perms)[0]
            perms[ready] = assign(ready, cost).to(device)
        done.add(ready)
        pending.remove(ready)


def weight_matching(spec: PermutationSpec, sd_a: dict, sd_b: dict, max_iter: int = 100, seed: int = 0,
                    dtype: torch.dtype = torch.float64, init: str = "identity",
                    solver: str = "lapjv") -> tuple[dict, dict]:
    """Git Re-Basin weight matching (coordinate descent over groups; see module doc). Each group's cost is the
    sum of cached ``_CostTerm``s; a group none of whose terms changed since its last assignment is skipped (the
    same cost gives the same assignment, so the step would be a no-op). ``init``: the sweeps start from the
    identity (Git Re-Basin's) or from ``_forward_start``; ``solver``: the assignment step (``_Assignment``)."""
    if init not in WM_INITS:
        raise ValueError(f"weight matching init {init!r} is unknown; allowed: {', '.join(WM_INITS)}")
    if solver not in WM_SOLVERS:
        raise ValueError(f"weight matching solver {solver!r} is unknown; allowed: {', '.join(WM_SOLVERS)}")
    assign = _Assignment(solver)
    t0 = time.perf_counter()
    keys = spec.parameters
    device = sd_a[keys[0]].device
    wa = {k: sd_a[k].to(device=device, dtype=dtype) for k in keys}
    wb = {k: sd_b[k].to(device=device, dtype=dtype) for k in keys}
    keyset = set(keys)
    terms = {g: [_CostTerm(wa[k], wb[k], ax, spec.axes[k]) for k, ax in spec.members[g] if k in keyset]
             for g in spec.groups}
    heads = _Ties(spec, terms)
    groups = [g for g in spec.groups if terms[g] and g not in spec.heads and g not in spec.stacks]
    units = groups + [t for t in heads.groups if heads.parts(t)]
    perms = {g: torch.arange(n, device=device) for g, n in spec.sizes.items()}

    def direct(among) -> float:
        return float(sum((wa[k] * permute_except(wb[k], spec.axes[k], perms, -1)).sum() for k in among))

    def objective(grp, parts) -> float:
        """J after a sweep: the last group's cost terms are current except for its own permutation, so its
        keys' share of J is Σ_i C[i, π(i)] of those terms; the other keys are summed directly."""
        if grp in heads.groups or any(g == grp for term in terms[grp] for _, g in term.others):
            return direct(keys)
        rows = torch.arange(spec.sizes[grp], device=device)
        own = {k for k, _ in spec.members[grp]}
        return float(sum(float(v[rows, perms[grp]].sum()) for v, _ in parts)) + direct([k for k in keys
                                                                                          if k not in own])

    if init == "forward":
        _forward_start(groups, terms, perms, device, assign, heads)
    gen = generator("weight_matching", seed)
    history = [direct(keys)]
    sweeps, solved, skipped = 0, set(), 0
    for _ in range(max_iter):
        sweeps += 1
        improved = False
        for gi in torch.randperm(len(units), generator=gen).tolist():
            grp = units[gi]
            if grp in heads.groups:  # an attention's heads: one exact step over its head groups
                parts = heads.parts(grp)
                if grp in solved and not any([t.current(perms)[1] for _, t, _ in parts]):
                    skipped += 1
                    continue
                solved.add(grp)
                improved |= heads.step(grp, perms, parts)
                continue
            n = spec.sizes[grp]
            parts = [term.current(perms) for term in terms[grp]]
            if grp in solved and not any(changed for _, changed in parts):
                skipped += 1
                continue
            cost = parts[0][0].clone()
            for value, _ in parts[1:]:
                cost += value
            solved.add(grp)
            new = assign(grp, cost).to(device)
            rows = torch.arange(n, device=device)
            old_score = float(cost[rows, perms[grp]].sum())
            new_score = float(cost[rows, new].sum())
            if new_score > old_score + 1e-12 * max(1.0, abs(old_score)):
                perms[grp] = new
                improved = True
        history.append(objective(grp, parts) if improved else history[-1])  # no step taken: J is unchanged
        if not improved:
            break
    info = {"objective": history[-1], "iterations": sweeps, "seconds": time.perf_counter() - t0,
            "objective_history": history, "skipped_steps": skipped}
    return {g: p.cpu() for g, p in perms.items()}, info


@torch.no_grad()
def activation_matching(model_a: nn.Module, model_b: nn.Module, spec: PermutationSpec, x: torch.Tensor,
                        batch_size: int = 500) -> tuple[dict, dict]:
    """Match units by the Pearson correlation of their activations on ``x`` (module doc)."""
    t0 = time.perf_counter()
    device = next(iter(model_a.state_dict().values())).device
    if spec.feature_nodes:  # a derived spec: features at the graph nodes that define each group
        moments = node_feature_moments(model_a, model_b, spec, x.to(device), batch_size=batch_size)
        per_feature = {g: [m.correlation() for m in ms] for g, ms in moments.items()}
    else:
        corrs = feature_correlations(model_a, model_b, x.to(device), batch_size=batch_size)
        per_feature = {g: [corrs[i] for i in idx] for g, idx in spec.feature_indices.items()}
    perms, per_group = {}, {}
    total, count = 0.0, 0
    for grp, feats in per_feature.items():
        if grp in spec.heads or grp in spec.stacks:
            continue  # inside an attention op: no graph node holds q, k or v (set below from the weights)
        c = torch.stack([f.double().cpu() for f in feats]).mean(0)
        if c.shape != (spec.sizes[grp],) * 2:
            raise ValueError(f"group {grp}: correlation matrix {tuple(c.shape)} does not match "
                             f"{spec.sizes[grp]} units; hidden_features and the spec disagree")
        _, col = linear_sum_assignment(c.numpy(), maximize=True)
        perms[grp] = torch.as_tensor(col, dtype=torch.long)
        matched = c[torch.arange(len(col)), perms[grp]]
        per_group[grp] = float(matched.mean())
        total += float(matched.sum())
        count += len(col)
    if spec.heads:
        perms = _heads_by_weights(spec, model_a.state_dict(), model_b.state_dict(), perms)
    info = {"objective": total / count, "iterations": 1, "seconds": time.perf_counter() - t0,
            "per_group": per_group}
    return perms, info


@torch.no_grad()
def _heads_by_weights(spec: PermutationSpec, sd_a: dict, sd_b: dict, perms: dict) -> dict:
    """``perms`` with every attention's head groups set by weight matching's exact step (``_Ties.step``) given
    the other groups' permutations: activation matching's choice inside an attention op, whose q, k and v no
    traced node holds. Ties share no tensor, so one step each is the optimum given the rest."""
    perms = dict(perms)
    for g in list(spec.heads) + list(spec.stacks):
        perms[g] = torch.arange(spec.sizes[g])
    keyset = set(spec.parameters)
    terms = {g: [_CostTerm(sd_a[k].double().cpu(), sd_b[k].double().cpu(), ax, spec.axes[k])
                 for k, ax in spec.members[g] if k in keyset] for g in spec.groups}
    heads = _Ties(spec, terms)
    for tie in heads.groups:
        heads.step(tie, perms, heads.parts(tie))
    return {g: p.cpu() for g, p in perms.items()}


def align(method: str, model_a: nn.Module, model_b: nn.Module, x_train: torch.Tensor | None = None,
          seed: int = 0, **kw) -> tuple[dict, dict]:
    """Permutations of model B that align it to model A with ``method`` (one of ``METHODS``).

    ``kw``: weight_matching takes ``max_iter`` and ``init``; activation_matching takes ``batch_size``.
    Apply the result with ``apply_permutation(permutation_spec(model_b), model_b.state_dict(), perms)``.
    """
    if method not in METHODS:
        raise ValueError(f"alignment method {method!r} is unknown; allowed: {', '.join(METHODS)}")
    spec = permutation_spec(model_a)
    spec_b = permutation_spec(model_b)
    if spec.axes != spec_b.axes or spec.sizes != spec_b.sizes:
        raise ValueError("models A and B have different architectures or widths; they cannot be aligned")
    if method == "identity":
        return identity(spec)
    if method == "random_permutation":
        return random_permutation(spec, seed)
    if method == "weight_matching":
        return weight_matching(spec, model_a.state_dict(), model_b.state_dict(), seed=seed, **kw)
    if x_train is None:
        raise ValueError("activation_matching needs x_train")
    return activation_matching(model_a, model_b, spec, x_train, **kw)
