#!/usr/bin/env python3
"""ppl, in Python with numpy: the paper's perplexity reward bonus (CDE,
arXiv 2509.09675; docs/algorithms.md), the same numbers as cde's in-tree
strategy "ppl" (strategies/ppl), bit for bit.

For a response of T tokens with old-policy log-probs logp(o_t) and reward r:

    B_actor = -(1/T) sum_t logp(o_t)        (0 for T = 0)
    bonus   = min(|r| / kappa, alpha * B_actor)

The sum runs left to right, as the Go loop does (np.cumsum, not np.sum's
pairwise order), so the float results are identical. The entry's `weight:`
schedule is applied by cde-run.

Params: kappa (> 0, default 3), alpha (> 0, default 1).
Metrics: explore/ppl/clip_frac (the fraction of responses whose bonus hit
the |r|/kappa cap).
"""
import os
import sys

import numpy as np

try:
    import cde_plugin
except ImportError:  # run from a checkout: the SDK is in python/
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python"))
    import cde_plugin


def actor_bonus(batch):
    """B_actor of every sequence: the mean negative log-prob, summed left
    to right (0 for an empty response)."""
    lengths = batch.lengths
    lp = batch.flat("logprobs")
    if lp is None:
        return np.zeros(len(batch))
    # Per-sequence left-to-right sums from one cumulative sum would mix the
    # sequences' rounding; cumsum each sequence's slice instead.
    out = np.zeros(len(batch))
    start = 0
    for i, t in enumerate(lengths):
        if t > 0:
            out[i] = -np.cumsum(lp[start:start + t])[-1] / t
        start += t
    return out


class PPL(cde_plugin.Strategy):
    name = "ppl"
    needs = cde_plugin.Needs()

    def __init__(self, params):
        self.kappa = float(params.get("kappa", 3))
        self.alpha = float(params.get("alpha", 1))
        if not self.kappa > 0:
            raise cde_plugin.ParamError("kappa", "must be > 0, got %r" % self.kappa)
        if not self.alpha > 0:
            raise cde_plugin.ParamError("alpha", "must be > 0, got %r" % self.alpha)

    def reward_bonus(self, info, batch):
        return np.minimum(np.abs(batch.reward) / self.kappa, self.alpha * actor_bonus(batch))

    def observe(self, info, batch):
        if len(batch) == 0:
            return {}
        capped = np.abs(batch.reward) / self.kappa < self.alpha * actor_bonus(batch)
        return {"clip_frac": float(np.mean(capped))}


if __name__ == "__main__":
    cde_plugin.serve(PPL)
