#!/usr/bin/env python3
"""The Python test plugin of plugins/python_test.go: a strategy whose
misbehaviour is chosen by its params (mode, at_step), as the Go test plugin
(plugins/internal/testplugin) does.

mode ok: every hook, deterministic in the batch; reward bonus
0.01 * T_i + 0.001 * step count, advantage bonus 0.001 * reward per token,
token loss pg_weight 1 + 0.1 * (token position parity), entropy 0.001;
observe counts batches (kept in the state).
At step at_step, the other modes misbehave in reward_bonus (or
advantage_bonus for advlen): crash (exit 3 after a message on stderr),
hang, short (one bonus too few), nan, inf, advlen (a row too long), error
(raise), badtype (a string), undeclared (iterates over batch.values,
which its needs do not declare). Mode fork behaves as ok but, in its first
observe, forks a child that sleeps (holding the shared-memory mappings it
inherited) and writes the child's pid to the file CDE_PYTEST_FORK_PID
names. Params correct, min_group and min_group_key add those needs. With
CDE_PYTEST_STDOUT set it prints on stdout before serving (the
mistake the host must report).
"""
import os
import sys
import time

import numpy as np

import cde_plugin

MODES = ("ok", "crash", "hang", "short", "nan", "inf", "advlen", "error", "badtype", "fork", "undeclared")


class TestPlugin(cde_plugin.Strategy):
    name = "pytest"
    needs = cde_plugin.Needs(entropies=True)

    def __init__(self, params):
        self.mode = params.get("mode", "ok")
        if self.mode not in MODES:
            raise cde_plugin.ParamError("mode", "want one of %s, got %r" % (", ".join(MODES), self.mode))
        self.at_step = int(params.get("at_step", 1))
        self.needs = cde_plugin.Needs(entropies=True, correct=params.get("correct", False),
                                      min_group=params.get("min_group", 0), min_group_key=params.get("min_group_key", ""))
        self.batches = 0

    def _misbehave(self, info, n):
        if info.step != self.at_step or self.mode in ("ok", "fork"):
            return None
        m = self.mode
        if m == "crash":
            sys.stderr.write("pytest: crashing on purpose\n")
            sys.stderr.flush()
            os._exit(3)
        if m == "hang":
            time.sleep(3600)
        if m == "short":
            return np.zeros(n - 1)
        if m == "nan":
            return np.full(n, np.nan)
        if m == "inf":
            return np.full(n, np.inf)
        if m == "error":
            raise RuntimeError("pytest: failing on purpose")
        if m == "badtype":
            return "not numbers"
        if m == "undeclared":
            return np.array([len(v) for v in self._batch.values], dtype=float)
        return None

    def reward_bonus(self, info, batch):
        self._batch = batch
        bad = self._misbehave(info, len(batch))
        if bad is not None:
            return bad
        return 0.01 * batch.lengths + 0.001 * self.batches

    def advantage_bonus(self, info, batch):
        rows = batch.token_rows()  # in the answer region over shared memory
        for row, r in zip(rows, batch.reward):
            row[:] = 0.001 * r
        if self.mode == "advlen" and info.step == self.at_step:
            rows[0] = np.zeros(len(rows[0]) + 1)
        return rows

    def token_loss(self, info, batch):
        return cde_plugin.TokenLoss(pg_weight=[1 + 0.1 * (np.arange(t) % 2) for t in batch.lengths], entropy_coef=0.001)

    def loss_terms(self, info):
        return cde_plugin.LossTerms(entropy_coef=0.0005)

    def observe(self, info, batch):
        if self.mode == "fork" and self.batches == 0:
            child = os.fork()
            if child == 0:
                try:
                    time.sleep(3600)
                finally:
                    os._exit(0)
            with open(os.environ["CDE_PYTEST_FORK_PID"], "w") as f:
                f.write("%d\n" % child)
        self.batches += 1
        ent = batch.entropies
        mean_ent = float(np.mean(np.concatenate(ent))) if ent is not None and sum(batch.lengths) > 0 else 0.0
        return {"batches": self.batches, "mean_entropy": mean_ent}

    def save_state(self):
        return str(self.batches).encode()

    def load_state(self, data):
        self.batches = int(data.decode())


if __name__ == "__main__":
    if os.environ.get("CDE_PYTEST_STDOUT"):
        print("hello from the plugin")
    cde_plugin.serve(TestPlugin)
