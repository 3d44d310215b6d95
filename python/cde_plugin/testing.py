"""Batches for unit tests of a strategy, without cde-run.

    from cde_plugin.testing import make_batch, make_info
    b = make_batch(lengths=[3, 5], reward=[1.0, -1.0])
    bonus = MyBonus({"scale": 0.1}).reward_bonus(make_info(), b)

Per-token signals are given per sequence (lists of N lists); what is not
given is absent (None in the batch), except logprobs, which default to
-1.0 per token as cde always sends them. make_batch's docstring lists
every keyword (docs/plugins.md too).
"""

import numpy as np

from . import Batch, Info
from . import cde_strategy_pb2 as pb


def _pack(rows, lengths, name):
    if rows is None:
        return []
    if len(rows) != len(lengths):
        raise ValueError("%s: want %d rows, got %d" % (name, len(lengths), len(rows)))
    out = []
    for i, (r, t) in enumerate(zip(rows, lengths)):
        r = list(np.asarray(r, dtype=np.float64).reshape(-1))
        if len(r) != t:
            raise ValueError("%s[%d]: want %d values, got %d" % (name, i, t, len(r)))
        out.extend(r)
    return out


def make_info(step=0, total_steps=10, algorithm="grpo", value_heads=0, seed=1, max_response_tokens=0):
    """An Info for a hook call."""
    return Info(step, total_steps, algorithm, value_heads, seed, max_response_tokens)


def make_batch(lengths, reward=None, group=None, correct=None, truncated=None, text=None, problem_id=None,
               answer_key=None, solution_key=None, prompt_lengths=None, reward_bonus=None, shaped_reward=None,
               logprobs=None, entropies=None, advantages=None, advantage_bonus=None, returns=None, values=None,
               value_heads=0, embedding=None, step=0, total_steps=10, algorithm="grpo", needs=None):
    """A Batch of len(lengths) sequences, as cde-run would send it.

    lengths: T_i, the response tokens of each sequence. Per sequence (N
    values each): reward (default 0), group (default: all in group 0),
    correct, truncated (default False), text (default ""), problem_id
    (default "p<group>"), answer_key and solution_key (default: none
    sent, so "" each), prompt_lengths (default 2), reward_bonus (default
    0) and shaped_reward (default reward + reward_bonus). Per token (N
    lists, list i of T_i values): logprobs (default -1.0 each),
    entropies, advantages, advantage_bonus, returns (default: absent,
    None in the batch). values: N arrays of T_i x value_heads. embedding:
    N x d. step, total_steps, algorithm: the batch's step info (the
    hooks' ``info`` comes from make_info). needs: a strategy's Needs; the
    batch then raises UndeclaredSignal on a signal they do not declare,
    as in cde-run (default None: every given signal reads).
    """
    n = len(lengths)
    lengths = [int(t) for t in lengths]
    group = list(group) if group is not None else [0] * n
    prompt_lengths = list(prompt_lengths) if prompt_lengths is not None else [2] * n
    if logprobs is None:
        logprobs = [[-1.0] * t for t in lengths]
    reward = [float(x) for x in reward] if reward is not None else [0.0] * n
    reward_bonus = [float(x) for x in reward_bonus] if reward_bonus is not None else [0.0] * n
    if shaped_reward is None:
        shaped_reward = [r + b for r, b in zip(reward, reward_bonus)]
    for name, v in (("reward", reward), ("reward_bonus", reward_bonus), ("shaped_reward", shaped_reward)):
        if len(v) != n:
            raise ValueError("%s: want %d values (one per sequence), got %d" % (name, n, len(v)))
    msg = pb.Batch(
        info=pb.StepInfo(step=step, total_steps=total_steps, algorithm=algorithm, seed=1),
        rollout_step=step, rollout_total_steps=total_steps, rollout_algorithm=algorithm, value_heads=value_heads,
        group=group, problem_id=list(problem_id) if problem_id is not None else ["p%d" % g for g in group],
        answer_key=list(answer_key) if answer_key is not None else [],
        solution_key=list(solution_key) if solution_key is not None else [],
        reward=reward,
        correct=list(correct) if correct is not None else [False] * n,
        truncated=list(truncated) if truncated is not None else [False] * n,
        text=list(text) if text is not None else [""] * n,
        lengths=lengths, prompt_lengths=prompt_lengths,
        reward_bonus=reward_bonus, shaped_reward=list(shaped_reward),
        prompt=[1] * sum(prompt_lengths), response=[5] * sum(lengths),
        logprobs=_pack(logprobs, lengths, "logprobs"), entropies=_pack(entropies, lengths, "entropies"),
        advantages=_pack(advantages, lengths, "advantages"),
        advantage_bonus=_pack(advantage_bonus, lengths, "advantage_bonus"),
        returns=_pack(returns, lengths, "returns"))
    if values is not None:
        msg.values.extend(np.concatenate([np.asarray(v, dtype=np.float64).reshape(t, value_heads)
                                          for v, t in zip(values, lengths)]).reshape(-1).tolist())
    if embedding is not None:
        e = np.asarray(embedding, dtype=np.float64)
        msg.embedding_dim = e.shape[1]
        msg.embedding.extend(e.reshape(-1).tolist())
    return Batch(msg, needs=needs)
