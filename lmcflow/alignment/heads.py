"""Attention heads in a permutation spec: structured groups, whose permutations are a subgroup of all the
permutations of their axis.

A *head group* (``spec.heads[g] = (tie, n_heads)``) permutes an axis of ``n_heads`` blocks of ``d`` units (the
heads, ``d`` the head dimension) by moving whole blocks and permuting units inside each block:
``perm[h·d + i] = σ(h)·d + τ_h(i)``: position block h takes the old block σ(h), in the order τ_h. Every head group
with the same ``tie`` (one attention op) shares σ; each has its own τ_h per head (q and k rows share one group,
v rows and the output projection's input columns another). A *stacked group* (``spec.stacks[g] = ((part, n),
…)``) permutes an axis made of consecutive segments (``nn.MultiheadAttention``'s packed ``in_proj_weight``:
q, k and v rows), each by its part's permutation (offset by the segment's start), or kept in order where the
part is None. Both are metadata on top of the usual table: ``apply_permutation`` re-indexes every axis by its
group's full permutation as for any group; what must respect the structure is whatever draws or chooses
permutations (``draw``, ``complete``, ``check``; weight matching's ``head_step``). Details: docs/internals.md.
"""
from __future__ import annotations

import numpy as np
import torch


def compose(sigma: torch.Tensor, taus: list) -> torch.Tensor:
    """The permutation of ``len(sigma)`` blocks of ``d`` units moving block σ(h) to h in the order τ_h."""
    d = len(taus[0]) if taus else 0
    return torch.cat([int(s) * d + t for s, t in zip(sigma.tolist(), taus, strict=True)]) if d else \
        torch.empty(0, dtype=torch.long)


def decompose(perm: torch.Tensor, n_heads: int) -> tuple | None:
    """(σ, [τ_h]) of a head-structured permutation, or None when ``perm`` moves units across blocks."""
    n = len(perm)
    if n_heads < 1 or n % n_heads:
        return None
    d = n // n_heads
    blocks = perm.view(n_heads, d)
    sigma = blocks[:, 0] // d
    if not torch.equal(blocks // d, sigma[:, None].expand(n_heads, d)):
        return None
    return sigma, [blocks[h] - sigma[h] * d for h in range(n_heads)]


def stacked(spec, perms: dict, g: str) -> torch.Tensor:
    """The permutation of stacked group ``g`` made from its parts' permutations."""
    out, start = [], 0
    for part, n in spec.stacks[g]:
        p = perms[part] if part is not None else torch.arange(n)
        out.append(p.to(torch.long).cpu() + start)
        start += n
    return torch.cat(out)


def complete(spec, perms: dict) -> dict:
    """``perms`` with every stacked group set from its parts (on the parts' device)."""
    out = dict(perms)
    for g in spec.stacks:
        dev = next((perms[p].device for p, _ in spec.stacks[g] if p is not None and p in perms), None)
        out[g] = stacked(spec, out, g).to(dev) if dev is not None else stacked(spec, out, g)
    return out


def _proof_sigma(h: int, index: int, previous, phase: int, gen: torch.Generator) -> torch.Tensor:
    """The proof's head permutation of the ``index``-th tie: every tie's heads must move (else a wrong block
    structure goes unseen) and each tie's differently from the tie before it (else one attention split into two
    ties goes unseen). Two heads allow one move: ties alternate between it and staying, and the proof's second
    pass (``phase`` 1) swaps the roles."""
    if h == 1:
        return torch.zeros(1, dtype=torch.long)
    if h == 2:
        return torch.tensor([1, 0]) if (index + phase) % 2 == 0 else torch.tensor([0, 1])
    while True:
        sigma = torch.randperm(h, generator=gen)
        if not torch.equal(sigma, torch.arange(h)) and (previous is None or len(previous) != h or
                                                        not torch.equal(sigma, previous)):
            return sigma


def draw(spec, gen: torch.Generator, phase: int | None = None) -> dict:
    """A random permutation of every group that respects the structure: a plain group any permutation, a tie
    one σ over its heads, each head group its own τ_h per head, a stacked group its parts'. ``phase`` None: σ
    uniform; 0 or 1: the proof's choice (``_proof_sigma``). For a spec without heads it draws exactly
    ``{g: torch.randperm(n, generator=gen)}`` in group order."""
    perms, sigmas = {}, {}
    for g, n in spec.sizes.items():
        if g in spec.stacks:
            continue
        if g in spec.heads:
            tie, h = spec.heads[g]
            if tie not in sigmas:
                sigmas[tie] = torch.randperm(h, generator=gen) if phase is None else \
                    _proof_sigma(h, len(sigmas), next(reversed(sigmas.values()), None), phase, gen)
            perms[g] = compose(sigmas[tie], [torch.randperm(n // h, generator=gen) for _ in range(h)])
        else:
            perms[g] = torch.randperm(n, generator=gen)
    return complete(spec, perms)


def ties(spec) -> dict:
    """{tie: [its head groups in group order]}."""
    out: dict = {}
    for g in spec.sizes:
        if g in spec.heads:
            out.setdefault(spec.heads[g][0], []).append(g)
    return out


def check_structure(spec) -> list[str]:
    """What is wrong with the spec's heads and stacks (empty when they are consistent)."""
    bad = []
    for tie, groups in ties(spec).items():
        counts = {spec.heads[g][1] for g in groups}
        if len(counts) > 1:
            bad.append(f"tie {tie}: head groups {groups} disagree on the number of heads {sorted(counts)}")
        for g in groups:
            h = spec.heads[g][1]
            if h < 1 or spec.sizes[g] % h:
                bad.append(f"head group {g}: {spec.sizes[g]} units are not {h} heads of equal size")
    for g in spec.heads:
        if g not in spec.sizes:
            bad.append(f"head group {g} is not a group of the spec")
    for g, parts in spec.stacks.items():
        if g not in spec.sizes:
            bad.append(f"stacked group {g} is not a group of the spec")
            continue
        total = sum(n for _, n in parts)
        if total != spec.sizes[g]:
            bad.append(f"stacked group {g}: its parts have {total} units, the group {spec.sizes[g]}")
        for p, n in parts:
            if p is not None and (p not in spec.heads or spec.sizes.get(p) != n):
                bad.append(f"stacked group {g}: part {p} is not a head group of {n} units")
    return bad


def check_perms(spec, perms: dict) -> None:
    """ValueError when ``perms`` breaks a head block or disagrees with a stacked group's parts."""
    sig = {}
    for g, (tie, h) in spec.heads.items():
        parts = decompose(perms[g].cpu(), h)
        if parts is None:
            raise ValueError(f"perms[{g!r}] moves units between heads; a head group permutes whole heads and "
                             f"the units inside each")
        if tie in sig and not torch.equal(sig[tie], parts[0]):
            raise ValueError(f"perms[{g!r}] moves the heads of {tie} differently from another of its groups")
        sig[tie] = parts[0]
    for g in spec.stacks:
        if not torch.equal(perms[g].cpu(), stacked(spec, perms, g)):
            raise ValueError(f"perms[{g!r}] is not the stack of its parts' permutations "
                             f"{[p for p, _ in spec.stacks[g]]}")


def _lap(c: np.ndarray) -> tuple[np.ndarray, float]:
    # Imported here: scipy.optimize is a quarter of a second of every merge, align and mechanism job's start-up
    # (this module comes in with the permutation spec), and only head alignment needs it.
    from scipy.optimize import linear_sum_assignment

    col = linear_sum_assignment(c, maximize=True)[1]
    return col, float(c[np.arange(len(col)), col].sum())


def head_step(costs: dict, n_heads: int) -> dict:
    """Weight matching's step for one tie: {group: its permutation} maximising Σ_g Σ_i C_g[i, perm_g(i)] over
    the head-structured permutations, exactly. For σ fixed the groups' τ_h are independent assignments, so the
    heads are matched by a linear assignment on S[h, h'] = Σ_g (the best assignment of C_g's block (h, h')),
    then each head's τ is that best assignment (``costs``: {group: n × n float64 array})."""
    n = len(next(iter(costs.values())))
    d = n // n_heads
    best = {}
    score = np.zeros((n_heads, n_heads))
    for g, c in costs.items():
        for h in range(n_heads):
            for k in range(n_heads):
                col, s = _lap(c[h * d:(h + 1) * d, k * d:(k + 1) * d])
                best[g, h, k] = col
                score[h, k] += s
    sigma = _lap(score)[0]
    return {g: compose(torch.as_tensor(sigma), [torch.as_tensor(best[g, h, int(sigma[h])], dtype=torch.long)
                                                for h in range(n_heads)]) for g in costs}
