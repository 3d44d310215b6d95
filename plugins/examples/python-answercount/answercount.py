#!/usr/bin/env python3
"""answercount, in Python: the answer-count bonus of the Go example
(plugins/examples/answercount), ported line for line onto cde_plugin.

For each prompt (group) of the batch, the final answer of every response
is extracted (the text after the last "Answer:", to the end of its line)
and normalised as cde's verifier does (tasks.NormalizeAnswer: white space
removed, trailing dots, $...$ and \\boxed{...} stripped, thousands
separators dropped, numbers in canonical form). With c(a) the number of the
group's responses giving answer a (plus, with history, the times it was
given to the same problem in earlier steps):

    bonus_i = beta / sqrt(c(a_i))

a response without an answer gets no_answer_bonus; with only_correct the
bonus goes to correct responses only. The entry's `weight:` schedule is
applied by cde-run.

Params: beta (> 0, default 0.5), history (bool, default false),
only_correct (bool, default false), no_answer_bonus (>= 0, default 0).
Metrics: explore/answercount/distinct_frac, no_answer_frac, problems.
State: the history, as the Go example's JSON.
"""
import json
import math
import os
import re
import sys
import unicodedata

try:
    import cde_plugin
except ImportError:  # run from a checkout: the SDK is in python/
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python"))
    import cde_plugin

ANSWER_MARKER = "Answer:"
_THOUSANDS = re.compile(r"^[+-]?[0-9]{1,3}(,[0-9]{3})+(\.[0-9]*)?$")
_NUMBER = re.compile(r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)$")


def _go_space(c):
    # Go's unicode.IsSpace, which strings.Fields splits on.
    return c in "\t\n\v\f\r \x85\xa0" or unicodedata.category(c) in ("Zs", "Zl", "Zp")


def _canonical_number(s):
    neg = False
    if s[0] == "-":
        neg, s = True, s[1:]
    elif s[0] == "+":
        s = s[1:]
    int_part, _, frac = s.partition(".")
    int_part = int_part.lstrip("0") or "0"
    frac = frac.rstrip("0")
    out = int_part + ("." + frac if frac else "")
    return "-" + out if neg and out != "0" else out


def normalize_answer(s):
    s = "".join(c for c in s if not _go_space(c))
    while True:
        prev = s
        if s.endswith("."):
            s = s[:-1]
        if len(s) >= 2 and s.startswith("$") and s.endswith("$"):
            s = s[1:-1]
        if s.startswith("\\boxed{") and s.endswith("}"):
            s = s[len("\\boxed{"):-1]
        if s == prev:
            break
    if _THOUSANDS.match(s):
        s = s.replace(",", "")
    if _NUMBER.match(s):
        s = _canonical_number(s)
    return s


def answer(text):
    """The normalised final answer of a response ("" for none)."""
    i = text.rfind(ANSWER_MARKER)
    if i < 0:
        return ""
    return normalize_answer(text[i + len(ANSWER_MARKER):].split("\n", 1)[0])


class AnswerCount(cde_plugin.Strategy):
    name = "answercount"
    needs = cde_plugin.Needs()

    def __init__(self, params):
        self.beta = float(params.get("beta", 0.5))
        self.history = params.get("history", False)
        self.only_correct = params.get("only_correct", False)
        self.no_answer_bonus = float(params.get("no_answer_bonus", 0))
        # With only_correct the strategy reads the verifier's verdicts.
        self.needs = cde_plugin.Needs(correct=self.only_correct is True)
        for key in ("history", "only_correct"):
            if not isinstance(getattr(self, key), bool):
                raise cde_plugin.ParamError(key, "want true or false, got %r" % (getattr(self, key),))
        if not self.beta > 0:
            raise cde_plugin.ParamError("beta", "must be > 0, got %r" % self.beta)
        if not self.no_answer_bonus >= 0:
            raise cde_plugin.ParamError("no_answer_bonus", "must be >= 0, got %r" % self.no_answer_bonus)
        self.seen = {}  # problem id -> answer -> count

    def _groups(self, batch):
        groups = {}
        for i, g in enumerate(batch.group):
            groups.setdefault(int(g), []).append(i)
        return list(groups.values())  # in order of first appearance, as core.Rollout.Groups

    def reward_bonus(self, info, batch):
        texts, ids, correct = batch.text, batch.problem_id, batch.correct
        answers = [answer(t) for t in texts]
        out = [0.0] * len(batch)
        for g in self._groups(batch):
            local = {}
            for i in g:
                if answers[i]:
                    local[answers[i]] = local.get(answers[i], 0) + 1
            for i in g:
                if self.only_correct and not correct[i]:
                    continue
                a = answers[i]
                if not a:
                    out[i] = self.no_answer_bonus
                    continue
                c = local[a] + (self.seen.get(ids[i], {}).get(a, 0) if self.history else 0)
                out[i] = self.beta / math.sqrt(c)
        if self.history:
            for i, a in enumerate(answers):
                if a:
                    h = self.seen.setdefault(ids[i], {})
                    h[a] = h.get(a, 0) + 1
        return out

    def observe(self, info, batch):
        m = {"explore/answercount/problems": float(len(self.seen))}
        groups = self._groups(batch)
        if not groups:
            return m
        distinct, none = 0.0, 0
        for g in groups:
            found = set()
            for i in g:
                a = answer(batch.text[i])
                if a:
                    found.add(a)
                else:
                    none += 1
            distinct += len(found) / len(g)
        m["explore/answercount/distinct_frac"] = distinct / len(groups)
        m["explore/answercount/no_answer_frac"] = none / len(batch)
        return m

    def save_state(self):
        return json.dumps({"version": 1, "problems": self.seen}, sort_keys=True, separators=(",", ":")).encode()

    def load_state(self, data):
        st = json.loads(data.decode())
        if st.get("version") != 1:
            raise ValueError("answercount: state version %r, want 1" % st.get("version"))
        seen = {}
        for pid, answers in (st.get("problems") or {}).items():
            for a, n in answers.items():
                if not isinstance(n, int) or n <= 0:
                    raise ValueError("answercount: state: count %r for problem %r answer %r" % (n, pid, a))
                seen.setdefault(pid, {})[a] = n
        self.seen = seen


if __name__ == "__main__":
    cde_plugin.serve(AnswerCount)
