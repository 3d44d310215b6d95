"""cde_plugin: write a cde exploration strategy in Python.

A strategy is a class; serving it is one line::

    import numpy as np
    import cde_plugin

    class MyBonus(cde_plugin.Strategy):
        name = "my_bonus"                 # metrics appear as explore/my_bonus/...
        needs = cde_plugin.Needs(entropies=False, value_heads=0, embeddings=False)

        def __init__(self, params):       # the config entry's params, as a dict
            self.scale = float(params.get("scale", 0.01))

        def reward_bonus(self, info, batch):   # -> N floats
            return self.scale * batch.lengths

    if __name__ == "__main__":
        cde_plugin.serve(MyBonus)

``__init__`` and every hook run on the plugin's main thread, one call at
a time: thread-local state set in ``__init__`` holds in the hooks, and
``signal.signal`` works in them.

The optional hooks, each called only if the class defines it:

- ``advantage_bonus(info, batch)``: a list of N arrays, array i of
  ``batch.lengths[i]`` floats;
- ``token_loss(info, batch)``: a :class:`TokenLoss`;
- ``loss_terms(info)``: a :class:`LossTerms`;
- ``observe(info, batch)``: a dict of metric name to float (a bare name
  ``x`` is logged as ``explore/<name>/x``);
- ``save_state(self)`` -> bytes and ``load_state(self, data)``: kept in
  cde's checkpoints and restored on resume.

``params`` is read strictly: a key the constructor never read is an error
naming ``strategies[i].params.KEY``, and :class:`ParamError` reports a bad
value the same way. docs/plugins.md has the walkthrough and the protocol.
"""

import numpy as np

__all__ = [
    "Strategy",
    "Needs",
    "ParamError",
    "UndeclaredSignal",
    "TokenLoss",
    "LossTerms",
    "Info",
    "Batch",
    "serve",
    "SDK_VERSION",
]

#: Identifies this SDK in the plugin's description (cde-run logs it).
SDK_VERSION = "cde-python-sdk/1"


class ParamError(Exception):
    """A bad value of the params key ``key``: cde-run reports it as
    ``config: strategies[i].params.KEY: message`` before training starts."""

    def __init__(self, key, message):
        super().__init__("%s: %s" % (key, message))
        self.key = key
        self.message = message


class UndeclaredSignal(AttributeError):
    """A hook read a signal its strategy's needs do not declare: cde-run
    did not send it. The message names the signal and the Needs flag that
    asks for it. (An AttributeError, so ``getattr(batch, name, None)``
    still answers None.)"""

    def __init__(self, signal, flag):
        super().__init__("batch.%s was not sent: the strategy's needs do not declare it "
                         "(cde-run sends only declared signals); set needs = cde_plugin.Needs(%s)" % (signal, flag))
        self.signal = signal
        self.flag = flag


class Needs:
    """The rollout signals a strategy reads (log-probs are always sent).

    entropies: per-token entropies of the old policy.
    value_heads: a critic with at least this many value heads; the batch
        then carries ``values`` (T_i x K per sequence).
    embeddings: False, True (the mean-pooled last hidden state) or a
        pooling name, "mean", "last" or "second_last"; the batch then
        carries ``embedding`` (N x d).
    correct: the strategy reads ``batch.correct``, the verifier's
        verdicts (a rollout file given to ``cde-run shape`` must then say
        ``correct`` for every sequence; the conformance check requires
        outputs that do not change with ``correct`` unless it is declared).
    min_group: every group must hold at least this many responses
        (cde-run requires rollout.n >= min_group); 0 for no least size.
    min_group_key: the params key that set min_group ("k"), named in
        cde-run's error as ``strategies[i].params.k``.

    Reading a signal the needs do not declare (``batch.entropies``
    without ``entropies=True``, ``batch.values`` without ``value_heads``,
    ``batch.embedding`` without ``embeddings``) raises
    :class:`UndeclaredSignal`, which names the flag to set.
    """

    def __init__(self, entropies=False, value_heads=0, embeddings=False, correct=False, min_group=0, min_group_key=""):
        if embeddings is True:
            embeddings = "mean"
        if embeddings not in (False, None, "", "mean", "last", "second_last"):
            raise ValueError("Needs.embeddings: want False, True, 'mean', 'last' or 'second_last', got %r" % (embeddings,))
        if int(value_heads) != value_heads or value_heads < 0:
            raise ValueError("Needs.value_heads: want an integer >= 0, got %r" % (value_heads,))
        if int(min_group) != min_group or min_group < 0:
            raise ValueError("Needs.min_group: want an integer >= 0, got %r" % (min_group,))
        if not isinstance(min_group_key, str):
            raise ValueError("Needs.min_group_key: want a str, got %r" % (min_group_key,))
        self.entropies = bool(entropies)
        self.value_heads = int(value_heads)
        self.pooling = embeddings or ""
        self.correct = bool(correct)
        self.min_group = int(min_group)
        self.min_group_key = min_group_key

    def __repr__(self):
        return "Needs(entropies=%r, value_heads=%r, embeddings=%r, correct=%r, min_group=%r, min_group_key=%r)" % (
            self.entropies, self.value_heads, self.pooling or False, self.correct, self.min_group, self.min_group_key)


class TokenLoss:
    """Per-token actor-loss weights (core.TokenLoss): ``pg_weight`` and
    ``abs_kl_coef`` are None (1 and 0 everywhere) or a list of N arrays,
    array i of ``batch.lengths[i]`` floats; ``entropy_coef`` is added to
    the run's entropy coefficient."""

    def __init__(self, pg_weight=None, abs_kl_coef=None, entropy_coef=0.0):
        self.pg_weight = pg_weight
        self.abs_kl_coef = abs_kl_coef
        self.entropy_coef = float(entropy_coef)


class LossTerms:
    """Loss terms of a step (core.LossTerms): the entropy coefficient."""

    def __init__(self, entropy_coef=0.0):
        self.entropy_coef = float(entropy_coef)


class Info:
    """The step: ``step``, ``total_steps``, ``algorithm``, ``value_heads``
    (K, 0 without a critic), the run's ``seed`` and
    ``max_response_tokens`` (the run's rollout.max_response_tokens, the
    longest a response can be; 0 when the host does not say)."""

    __slots__ = ("step", "total_steps", "algorithm", "value_heads", "seed", "max_response_tokens")

    def __init__(self, step, total_steps, algorithm, value_heads, seed=0, max_response_tokens=0):
        self.step = int(step)
        self.total_steps = int(total_steps)
        self.algorithm = algorithm
        self.value_heads = int(value_heads)
        self.seed = int(seed)
        self.max_response_tokens = int(max_response_tokens)

    def __repr__(self):
        return "Info(step=%d, total_steps=%d, algorithm=%r, value_heads=%d)" % (
            self.step, self.total_steps, self.algorithm, self.value_heads)


def _split(flat, lengths, offsets):
    return [flat[offsets[i]:offsets[i + 1]] for i in range(len(lengths))]


class Batch:
    """One step's rollout, as numpy arrays (read-only views of the message).

    Per sequence (length N = ``len(batch)``): ``group``, ``reward``,
    ``correct``, ``truncated``, ``lengths`` (T_i, response tokens),
    ``prompt_lengths``, ``reward_bonus``, ``shaped_reward`` (arrays), and
    ``problem_id``, ``text``, ``answer_key``, ``solution_key`` (lists of
    str; the keys are "" where the verifier names none, and all "" when
    the host sent none). ``answer_key`` is the final answer, as the
    task's verifier extracts and normalises it (for correct and incorrect
    responses alike); ``solution_key`` names a correct response's
    solution beyond its answer (countdown: the canonical expression), ""
    for an incorrect one.

    Per sequence, lists of N per-token arrays: ``prompt``, ``response``
    (token ids), ``logprobs``, ``entropies`` (when declared), ``values``
    (T_i x K, when declared), ``advantages``, ``advantage_bonus``,
    ``returns``; a signal the host did not send is None, and one the
    strategy's needs do not declare (``entropies``, ``values``,
    ``embedding``) raises :class:`UndeclaredSignal` naming the flag to
    set. ``embedding`` is
    N x d (when declared), else None. The packed forms are there too:
    ``flat("logprobs")`` is the sum(T_i) array of every sequence's tokens.

    Arrays are converted from the message on first use, so a hook pays
    only for what it reads. Token ids (``prompt``, ``response``) are int32,
    as on the wire; the other arrays are int64, float64 or bool.

    Shared memory (protocol version 3, Linux): when cde-run sends the
    large arrays through shared memory, ``prompt``, ``response``, the
    per-token signals, ``values`` and ``embedding`` are read-only views of
    the host's memory, with no copy. They hold their content during the
    hook call only: the host rewrites that memory for a later call, so
    copy (``np.array(x)``) what a strategy keeps beyond it.
    """

    _PER_SEQ = {"group": np.int64, "reward": np.float64, "correct": bool, "truncated": bool,
                "lengths": np.int64, "prompt_lengths": np.int64, "reward_bonus": np.float64,
                "shaped_reward": np.float64}
    _PER_TOKEN = ("logprobs", "entropies", "advantages", "advantage_bonus", "returns")

    def __init__(self, msg, _regions=None, needs=None):
        self._msg = msg
        self._cache = {}
        # With needs (as the SDK's server gives them), reading a signal they
        # do not declare raises UndeclaredSignal instead of giving None.
        self._needs = needs
        self._regions = _regions
        self._answer_taken = False
        self.value_heads = int(msg.value_heads)
        # The arrays in shared memory, checked now (a header that lies is
        # an error before the hook runs): name -> read-only view.
        self._shm = {}
        if msg.HasField("shm"):
            from . import _shm
            self._shm = _shm.input_arrays(msg, _regions if _regions is not None else _shm.Regions())

    def __len__(self):
        return len(self._msg.lengths)

    def _offsets(self, key="lengths"):
        ck = "_off_" + key
        if ck not in self._cache:
            off = np.zeros(len(self) + 1, dtype=np.int64)
            np.cumsum(getattr(self, key), out=off[1:])
            self._cache[ck] = off
        return self._cache[ck]

    def _check_declared(self, name):
        n = self._needs
        if n is None:
            return
        if name == "entropies" and not n.entropies:
            raise UndeclaredSignal("entropies", "entropies=True")
        if name == "values" and n.value_heads == 0:
            raise UndeclaredSignal("values", "value_heads=K")
        if name == "embedding" and not n.pooling:
            raise UndeclaredSignal("embedding", "embeddings=True")

    def token_rows(self, width=1):
        """N zeroed float64 rows, row i of T_i * width values, that are
        views of one array (the batch's layout: sequence i's tokens at
        ``[o[i], o[i+1])`` of the flat array). Fill them and return them
        from ``advantage_bonus`` or as ``TokenLoss.pg_weight``: over shared
        memory the first such array of a call lies in the host's answer
        region, so the answer is written where cde-run reads it, with no
        copy (``advantage_bonus`` with width 1; a hook answers with rows of
        its own just as well)."""
        width = int(width)
        off = self._offsets() * width
        total = int(off[-1])
        flat = None
        if not self._answer_taken and self._regions is not None and total > 0:
            from . import _shm
            view, _ = _shm.answer_view(self._msg, self._regions, 8 * total)
            if view is not None:
                flat = view[:total]
                flat[:] = 0
                self._answer_taken = True
        if flat is None:
            flat = np.zeros(total)
        return [flat[off[i]:off[i + 1]] for i in range(len(self))]

    def flat(self, name):
        """The packed per-token array of ``name`` (None when absent)."""
        self._check_declared(name)
        if name in self._shm:
            return self._shm[name]
        ck = "_flat_" + name
        if ck not in self._cache:
            field = getattr(self._msg, name)
            if len(field) == 0:
                arr = None
            else:
                dtype = np.int32 if name in ("prompt", "response") else np.float64
                arr = np.fromiter(field, dtype, count=len(field))
                arr.flags.writeable = False
            self._cache[ck] = arr
        return self._cache[ck]

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        cache = self.__dict__.get("_cache")
        if cache is None:
            raise AttributeError(name)
        if name in cache:
            return cache[name]
        self._check_declared(name)
        msg = self.__dict__["_msg"]
        if name in Batch._PER_SEQ:
            field = getattr(msg, name)
            v = np.fromiter(field, Batch._PER_SEQ[name], count=len(field))
            v.flags.writeable = False
        elif name in ("problem_id", "text"):
            v = list(getattr(msg, name))
        elif name in ("answer_key", "solution_key"):
            v = list(getattr(msg, name)) or [""] * len(self)
        elif name == "prompt":
            f = self.flat("prompt")
            v = _split(f if f is not None else np.zeros(0, np.int32), self.prompt_lengths, self._offsets("prompt_lengths"))
        elif name == "response":
            f = self.flat("response")
            v = _split(f if f is not None else np.zeros(0, np.int32), self.lengths, self._offsets())
        elif name in Batch._PER_TOKEN:
            f = self.flat(name)
            v = None if f is None else _split(f, self.lengths, self._offsets())
        elif name == "values":
            k = self.value_heads
            f = self.flat("values")
            if f is None or k == 0:
                v = None
            else:
                v = _split(f.reshape(-1, k), self.lengths, self._offsets())
        elif name == "embedding":
            d = int(msg.embedding_dim)
            f = self.flat("embedding")
            if f is None or d == 0:
                v = None
            else:
                v = f.reshape(len(self), d)
        else:
            raise AttributeError("Batch has no field %r" % name)
        cache[name] = v
        return v


class Strategy:
    """Base class of a Python strategy. Set ``name`` (the metrics prefix)
    and ``needs``; define ``__init__(self, params)`` and any hooks.

    Before ``__init__`` runs, the instance has ``algorithm`` (the run's
    algorithm name), ``algorithm_needs_critic`` and ``seed`` (the run's
    seed), and ``log``, a :class:`logging.Logger` whose records appear in
    cde-run's log tagged with the plugin.
    """

    name = ""
    needs = Needs()

    def __init__(self, params):
        pass


def _hooks(cls):
    """The optional hooks cls defines (a name: defined)."""
    names = ("reward_bonus", "advantage_bonus", "token_loss", "loss_terms", "observe", "save_state", "load_state")
    return {n: callable(getattr(cls, n, None)) for n in names}


def serve(strategy_class):
    """Serve strategy_class to the cde-run that started this process;
    returns only when cde-run closes the plugin (then the process exits).
    Run by hand, it explains that it is a plugin and exits with status 1."""
    from . import _server

    _server.serve(strategy_class)

