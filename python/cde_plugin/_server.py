"""go-plugin's protocol, as cde-run (the Go host) expects it.

Section by section, what go-plugin's Go SDK does for a Go plugin:

1. the magic cookie check and the strategy-protocol version negotiation
   (environment: CDE_STRATEGY_PLUGIN, PLUGIN_PROTOCOL_VERSIONS);
2. AutoMTLS: the host's client certificate from PLUGIN_CLIENT_CERT is the
   only one accepted, and the plugin's own self-signed certificate goes in
   the handshake line (_cert.py);
3. the gRPC server on a Unix socket: the strategy service
   (cde.strategy.v1.Strategy, plugins/proto/cde_strategy.proto) plus
   go-plugin's health service, controller (Shutdown) and stdio stream;
4. the handshake line on stdout; from then on stdout goes to stderr (the
   host reads no more of stdout) and logs are hclog JSON lines on stderr,
   which cde-run logs tagged with the plugin.

The strategy's own code, its ``__init__`` and every hook, runs on the
main thread (_MainLoop): gRPC's worker threads only hand each call over
and wait for its answer. So thread-local state set in ``__init__`` holds
in every hook, and ``signal.signal`` works in them.
"""

import base64
import collections.abc
import concurrent.futures
import json
import logging
import os
import queue
import shutil
import sys
import tempfile
import threading
import traceback

import grpc
import numpy as np

from . import SDK_VERSION, Batch, Info, LossTerms, Needs, ParamError, Strategy, TokenLoss, UndeclaredSignal, _hooks, _shm
from . import cde_strategy_pb2 as pb
from ._cert import self_signed_certificate

MAGIC_COOKIE_KEY = "CDE_STRATEGY_PLUGIN"
MAGIC_COOKIE_VALUE = "c0e5e1a7-rlvr-exploration-strategy"
CORE_PROTOCOL_VERSION = 1  # go-plugin's own protocol
PROTOCOL_VERSIONS = (1, 2, 3)  # the strategy protocol versions this SDK speaks
MAX_MESSAGE_SIZE = 7 << 28  # plugins/protocol.go MaxMessageSize


# --- logging: hclog JSON lines on stderr -----------------------------------

_LEVELS = {logging.DEBUG: "debug", logging.INFO: "info", logging.WARNING: "warn", logging.ERROR: "error",
           logging.CRITICAL: "error"}


class _HclogHandler(logging.Handler):
    """Writes records as {"@level", "@message", "@module"} JSON lines on
    the original stderr: cde-run logs them at that level with the plugin's
    name (no @timestamp: cde-run stamps the line)."""

    def __init__(self, stream):
        super().__init__()
        self.stream = stream

    def emit(self, record):
        try:
            line = {"@level": _LEVELS.get(record.levelno, "info"), "@message": record.getMessage(),
                    "@module": record.name}
            if record.exc_info:
                line["error"] = "".join(traceback.format_exception(*record.exc_info)).rstrip()
            self.stream.write(json.dumps(line) + "\n")
            self.stream.flush()
        except Exception:
            self.handleError(record)


log = logging.getLogger("cde_plugin")


# --- conversions -------------------------------------------------------------


class _HookError(Exception):
    """A hook's answer that cannot be sent (wrong length, not finite)."""


def _floats(x, what, n=None):
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise _HookError("%s: want floats, got %s (%s)" % (what, type(x).__name__, e))
    if a.ndim != 1:
        raise _HookError("%s: want a 1-D array of floats, got shape %s" % (what, a.shape))
    if n is not None and a.shape[0] != n:
        raise _HookError("%s: want %d floats (one per sequence), got %d" % (what, n, a.shape[0]))
    if not np.all(np.isfinite(a)):
        i = int(np.flatnonzero(~np.isfinite(a))[0])
        raise _HookError("%s: entry %d is %r, not finite" % (what, i, float(a[i])))
    return a


class _Rows:
    """N per-token rows, row i checked to hold lengths[i] floats; packed
    (concatenated) only where they go: into the answer region directly, or
    into one array for the message. Finiteness is checked on the packed
    values."""

    def __init__(self, rows, lengths, what):
        if rows is None:
            raise _HookError("%s: got None, want a list of %d arrays" % (what, len(lengths)))
        rows = list(rows)
        if len(rows) != len(lengths):
            raise _HookError("%s: want %d arrays (one per sequence), got %d" % (what, len(lengths), len(rows)))
        self.arrays = []
        for i, (r, t) in enumerate(zip(rows, lengths)):
            try:
                a = np.asarray(r, dtype=np.float64)
            except (TypeError, ValueError) as e:
                raise _HookError("%s[%d]: want floats, got %s (%s)" % (what, i, type(r).__name__, e))
            if a.ndim != 1 or a.shape[0] != t:
                raise _HookError("%s[%d]: want %d floats (the sequence's tokens), got shape %s" % (what, i, t, a.shape))
            self.arrays.append(a)
        self.what = what
        self.total = int(sum(lengths))

    def __len__(self):
        return self.total

    def _in_place(self, dst):
        """Whether every row already lies at its place in dst (rows from
        Batch.token_rows in the answer region)."""
        base = dst.__array_interface__["data"][0]
        pos = 0
        for a in self.arrays:
            if len(a) > 0 and (a.__array_interface__["data"][0] != base + 8 * pos or a.strides != (8,)):
                return False
            pos += len(a)
        return True

    def into(self, dst):
        """Writes the rows, concatenated, into dst (total floats); rows
        already in place are not copied."""
        if self.arrays and not self._in_place(dst):
            arrays = self.arrays
            if any(np.may_share_memory(a, dst) for a in arrays):
                arrays = [np.array(a) for a in arrays]  # read them all before writing
            np.concatenate(arrays, out=dst)
        if not np.isfinite(dst).all():
            j = int(np.flatnonzero(~np.isfinite(dst))[0])
            raise _HookError("%s: token %d of the batch is %r, not finite" % (self.what, j, float(dst[j])))

    def flat(self):
        out = np.empty(self.total)
        self.into(out)
        return out


def _varint(v):
    out = bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _packed_doubles(field, a):
    """The wire bytes of a packed `repeated double` field holding a (tag,
    length, the little-endian doubles): merged into a message they give
    the same message as assigning a.tolist(), byte for byte, about 80
    times faster for 131,072 values (python/tests/test_sdk.py PackedTest)."""
    b = np.ascontiguousarray(a, dtype="<f8").tobytes()
    return _varint(field << 3 | 2) + _varint(len(b)) + b


def _set_doubles(msg, field, a):
    """Sets msg's packed double field number field (empty now) to a."""
    if len(a):
        msg.MergeFromString(_packed_doubles(field, a))


class _Params(collections.abc.Mapping):
    """The params mapping given to a strategy's constructor, recording which
    keys it read, so that a key nobody read is reported as unknown. Every
    way of reading a value counts: ``p[k]``, ``get``, ``in``, ``pop``,
    ``items()``, ``values()``, ``copy()``, and what goes through them:
    ``dict(p)``, ``{**p}``, ``d.update(p)``. Listing the keys alone
    (``list(p)``) reads no value. Not a dict subclass: a dict's C methods
    (``dict.update`` given a dict, ``**`` on one) would read around it."""

    def __init__(self, m):
        self._m = dict(m)
        self.read = set()

    def __getitem__(self, k):
        self.read.add(k)
        return self._m[k]

    def __iter__(self):
        return iter(self._m)

    def __len__(self):
        return len(self._m)

    def __contains__(self, k):
        self.read.add(k)
        return k in self._m

    def pop(self, k, *default):
        self.read.add(k)
        return self._m.pop(k, *default)

    def copy(self):
        return {k: self[k] for k in self._m}

    def __repr__(self):
        return "Params(%r)" % (self._m,)


# --- the strategy service ------------------------------------------------------


class _Service:
    def __init__(self, cls, version):
        self.cls = cls
        self.version = version
        self.s = None
        self.hooks = _hooks(cls)
        if self.hooks["save_state"] != self.hooks["load_state"]:
            raise TypeError("%s defines only one of save_state and load_state: define both, or neither" % cls.__name__)
        if self.hooks["token_loss"] and version < 2:
            log.warning("cde-run speaks strategy protocol version %d, which has no token_loss hook: it is not declared" % version)
        self.value_heads = 0
        self.shm = False  # version 3: the Configure probe region was mapped
        self.regions = _shm.Regions()

    def description(self):
        needs = getattr(self.s, "needs", None) or Needs()
        h = self.hooks
        return pb.Description(
            protocol_version=self.version, name=self.s.name, sdk=SDK_VERSION,
            needs=pb.Needs(logprobs=True, entropies=needs.entropies, pooling=needs.pooling,
                           value_heads=needs.value_heads, head_masks=False, correct=needs.correct,
                           min_group=needs.min_group, min_group_key=needs.min_group_key),
            capabilities=pb.Capabilities(reward_bonus=h["reward_bonus"], advantage_bonus=h["advantage_bonus"],
                                         loss_terms=h["loss_terms"], observe=h["observe"], state=h["save_state"],
                                         token_loss=h["token_loss"] and self.version >= 2, head_masks=False),
            shm=self.shm)

    # Each handler returns (response, None) or (None, (code, message)).

    def configure(self, req):
        if self.s is not None:
            return None, (grpc.StatusCode.FAILED_PRECONDITION, "already configured")
        path = req.params_path

        def key(k):
            return "config: %s%s" % (path + "." if path else "", k)

        try:
            params = json.loads(req.params_json) if req.params_json else {}
        except ValueError as e:
            return None, (grpc.StatusCode.INVALID_ARGUMENT, "params: %s" % e)
        if not isinstance(params, dict):
            return None, (grpc.StatusCode.INVALID_ARGUMENT, "params: want a mapping, got %r" % (params,))
        p = _Params(params)
        s = self.cls.__new__(self.cls)
        s.algorithm = req.algorithm
        s.algorithm_needs_critic = req.algorithm_needs_critic
        s.seed = req.seed
        s.log = logging.getLogger("cde_plugin." + (self.cls.name or self.cls.__name__))
        try:
            s.__init__(p)
        except ParamError as e:
            return None, (grpc.StatusCode.INVALID_ARGUMENT, "%s: %s" % (key(e.key), e.message))
        except Exception as e:
            log.error("configure failed", exc_info=True)
            return None, (grpc.StatusCode.INVALID_ARGUMENT, "%s: %s: %s" % (key("")[:-1] if path else "config: params",
                                                                             type(e).__name__, e))
        unknown = sorted(k for k in params if k not in p.read)
        if unknown:
            known = sorted(p.read)
            return None, (grpc.StatusCode.INVALID_ARGUMENT, "%s: unknown key (known keys here: %s)" % (
                key(unknown[0]), ", ".join(known) if known else "none"))
        name = getattr(s, "name", "")
        if not isinstance(name, str) or not name:
            return None, (grpc.StatusCode.INVALID_ARGUMENT, "%s has no name: set the class attribute name" % self.cls.__name__)
        if not isinstance(getattr(s, "needs", Needs()), Needs):
            return None, (grpc.StatusCode.INVALID_ARGUMENT, "%s.needs: want a cde_plugin.Needs" % self.cls.__name__)
        self.s = s
        if self.version >= 3 and req.HasField("shm_probe"):
            # Never a Configure error: without shared memory the host
            # sends the batches in the messages.
            why = _shm.probe(req.shm_probe)
            if why is None:
                self.shm = True
            else:
                log.warning("shared memory unavailable, batches come in the messages: %s" % why)
        return self.description(), None

    def describe(self, _req):
        if self.s is None:
            return None, (grpc.StatusCode.FAILED_PRECONDITION, "not configured yet: call Configure first")
        return self.description(), None

    def _call(self, hook, f):
        if self.s is None:
            return None, (grpc.StatusCode.FAILED_PRECONDITION, "not configured yet: call Configure first")
        if not self.hooks.get(hook):
            return None, (grpc.StatusCode.UNIMPLEMENTED, "the strategy does not implement %s" % hook)
        try:
            return f(), None
        except _shm.BatchError as e:
            return None, (grpc.StatusCode.INVALID_ARGUMENT, str(e))
        except _HookError as e:
            return None, (grpc.StatusCode.ABORTED, str(e))
        except UndeclaredSignal as e:
            log.error("%s failed" % hook, exc_info=True)
            return None, (grpc.StatusCode.ABORTED, "%s: %s" % (hook, e))
        except Exception as e:
            log.error("%s failed" % hook, exc_info=True)
            return None, (grpc.StatusCode.ABORTED, "%s: %s: %s" % (hook, type(e).__name__, e))

    def _info(self, i, value_heads):
        return Info(i.step, i.total_steps, i.algorithm, value_heads, i.seed, i.max_response_tokens)

    def _batch(self, msg):
        self.value_heads = int(msg.value_heads)
        return self._info(msg.info, msg.value_heads), Batch(msg, self.regions, needs=getattr(self.s, "needs", None) or Needs())

    def _answer(self, msg, hook, parts):
        """Writes parts, (offset in float64 values, float64 array) pairs,
        into msg's answer region: True when they are there, False when
        they go in the message (no region, too small, or it cannot be
        mapped)."""
        n = max((off + len(a) for off, a in parts), default=0)
        if n == 0 or not msg.HasField("shm") or not msg.shm.HasField("answer"):
            return False
        view, why = _shm.answer_view(msg, self.regions, 8 * n)
        if view is None:
            log.warning("%s: answering in the message: %s" % (hook, why))
            return False
        for off, a in parts:
            a.into(view[off:off + len(a)])
        return True

    def reward_bonus(self, msg):
        def f():
            info, b = self._batch(msg)
            out = _floats(self.s.reward_bonus(info, b), "reward_bonus", len(b))
            return pb.RewardBonusResponse(bonus=out.tolist())
        return self._call("reward_bonus", f)

    def advantage_bonus(self, msg):
        def f():
            info, b = self._batch(msg)
            lengths = list(msg.lengths)
            rows = _Rows(self.s.advantage_bonus(info, b), lengths, "advantage_bonus")
            r = pb.AdvantageBonusResponse(lengths=lengths)
            if self._answer(msg, "advantage_bonus", [(0, rows)]):
                r.in_shm = True
            else:
                _set_doubles(r, 2, rows.flat())
            return r
        return self._call("advantage_bonus", f)

    def token_loss(self, msg):
        if self.version < 2:
            return None, (grpc.StatusCode.UNIMPLEMENTED, "TokenLoss needs protocol version 2; this plugin serves version %d" % self.version)

        def f():
            info, b = self._batch(msg)
            tl = self.s.token_loss(info, b)
            if not isinstance(tl, TokenLoss):
                raise _HookError("token_loss: want a cde_plugin.TokenLoss, got %s" % type(tl).__name__)
            lengths = list(msg.lengths)
            r = pb.TokenLossResponse(entropy_coef=_floats([tl.entropy_coef], "token_loss.entropy_coef")[0])
            pg = kl = None
            if tl.pg_weight is not None:
                r.has_pg_weight = True
                pg = _Rows(tl.pg_weight, lengths, "token_loss.pg_weight")
            if tl.abs_kl_coef is not None:
                r.has_abs_kl_coef = True
                kl = _Rows(tl.abs_kl_coef, lengths, "token_loss.abs_kl_coef")
            # In the answer region: pg_weight at byte offset 0, abs_kl_coef
            # at 8 * sum(T_i), whether or not pg_weight is there.
            total = sum(lengths)
            if self._answer(msg, "token_loss", [p for p in ((0, pg), (total, kl)) if p[1] is not None]):
                r.in_shm = True
            else:
                if pg is not None:
                    _set_doubles(r, 2, pg.flat())
                if kl is not None:
                    _set_doubles(r, 4, kl.flat())
            return r
        return self._call("token_loss", f)

    def loss_terms(self, msg):
        def f():
            lt = self.s.loss_terms(self._info(msg, self.value_heads))
            if not isinstance(lt, LossTerms):
                raise _HookError("loss_terms: want a cde_plugin.LossTerms, got %s" % type(lt).__name__)
            return pb.LossTermsResponse(entropy_coef=_floats([lt.entropy_coef], "loss_terms.entropy_coef")[0])
        return self._call("loss_terms", f)

    def observe(self, msg):
        def f():
            info, b = self._batch(msg)
            m = self.s.observe(info, b)
            if m is None:
                m = {}
            if not isinstance(m, dict):
                raise _HookError("observe: want a dict of metric name to float, got %s" % type(m).__name__)
            out = {}
            for k, v in m.items():
                if not isinstance(k, str) or not k:
                    raise _HookError("observe: metric name %r: want a non-empty str" % (k,))
                out[k] = float(v)
            return pb.ObserveResponse(metrics=out)
        return self._call("observe", f)

    def save_state(self, _req):
        def f():
            data = self.s.save_state()
            if not isinstance(data, (bytes, bytearray)):
                raise _HookError("save_state: want bytes, got %s" % type(data).__name__)
            return pb.State(data=bytes(data))
        return self._call("save_state", f)

    def load_state(self, msg):
        def f():
            self.s.load_state(bytes(msg.data))
            return pb.LoadStateResponse()
        return self._call("load_state", f)


class _MainLoop:
    """Runs the strategy's code on one thread, the main one: gRPC's worker
    threads call :meth:`call`, which queues the call and waits for its
    answer, and the main thread runs the queued calls one at a time in
    :meth:`run` until :meth:`close`. So ``__init__`` and every hook run on
    the same thread (thread-local state set in ``__init__`` holds in the
    hooks), that thread is the main one (``signal.signal`` works there,
    and a signal's handler runs while the plugin waits for a call), and
    hooks are called one at a time."""

    _CLOSE = object()

    def __init__(self):
        self._q = queue.SimpleQueue()
        self.ident = None  # the thread that runs the calls, once run started

    def call(self, fn, request):
        """fn(request) on the loop's thread: its (response, error) pair."""
        done = threading.Event()
        box = []
        self._q.put((fn, request, box, done))
        done.wait()
        return box[0]

    def close(self):
        self._q.put(_MainLoop._CLOSE)

    def run(self):
        """Runs queued calls until close. A SystemExit or KeyboardInterrupt
        raised by a call answers it with an error, then propagates (the
        plugin exits, as a script calling sys.exit expects)."""
        self.ident = threading.get_ident()
        while True:
            item = self._q.get()
            if item is _MainLoop._CLOSE:
                return
            fn, request, box, done = item
            try:
                box.append(fn(request))
            except Exception as e:
                log.error("%s failed" % getattr(fn, "__name__", "call"), exc_info=True)
                box.append((None, (grpc.StatusCode.ABORTED, "%s: %s: %s" % (
                    getattr(fn, "__name__", "call"), type(e).__name__, e))))
            except BaseException as e:
                box.append((None, (grpc.StatusCode.UNAVAILABLE, "the plugin is exiting: %s%s" % (
                    type(e).__name__, ": %s" % e if str(e) else ""))))
                raise
            finally:
                done.set()


def _unary(loop, fn, req_type):
    def handler(request, context):
        resp, err = loop.call(fn, request)  # one call at a time, on the main thread
        if err is not None:
            context.abort(err[0], err[1])
        return resp
    return grpc.unary_unary_rpc_method_handler(handler, request_deserializer=req_type.FromString,
                                               response_serializer=lambda m: m.SerializeToString())


# --- serve ---------------------------------------------------------------------


def _fail(msg):
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()
    sys.exit(1)


def serve(cls):
    if not (isinstance(cls, type) and issubclass(cls, Strategy)):
        raise TypeError("cde_plugin.serve: want a subclass of cde_plugin.Strategy, got %r" % (cls,))
    # 1. handshake environment
    if os.environ.get(MAGIC_COOKIE_KEY) != MAGIC_COOKIE_VALUE:
        _fail("This program is a cde strategy plugin: cde-run starts it (see docs/plugins.md).")
    offered = [int(v) for v in os.environ.get("PLUGIN_PROTOCOL_VERSIONS", "").split(",") if v.strip().isdigit()]
    common = sorted(set(offered) & set(PROTOCOL_VERSIONS))
    if not common:
        _fail("cde-run offers strategy protocol versions %s, this plugin speaks %s" % (offered, list(PROTOCOL_VERSIONS)))
    version = common[-1]
    client_cert = os.environ.get("PLUGIN_CLIENT_CERT", "")
    if not client_cert:
        _fail("PLUGIN_CLIENT_CERT is not set: this plugin needs cde-run's AutoMTLS")

    stderr = sys.stderr
    handler = _HclogHandler(stderr)
    root = logging.getLogger()
    root.addHandler(handler)
    if root.level == logging.NOTSET or root.level > logging.INFO:
        root.setLevel(logging.INFO)

    service = _Service(cls, version)
    loop = _MainLoop()

    # 3. the gRPC services
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=8),
                         options=[("grpc.max_receive_message_length", MAX_MESSAGE_SIZE),
                                  ("grpc.max_send_message_length", MAX_MESSAGE_SIZE)])
    methods = {
        "Describe": _unary(loop, service.describe, pb.DescribeRequest),
        "Configure": _unary(loop, service.configure, pb.ConfigureRequest),
        "RewardBonus": _unary(loop, service.reward_bonus, pb.Batch),
        "AdvantageBonus": _unary(loop, service.advantage_bonus, pb.Batch),
        "LossTerms": _unary(loop, service.loss_terms, pb.StepInfo),
        "TokenLoss": _unary(loop, service.token_loss, pb.Batch),
        "Observe": _unary(loop, service.observe, pb.Batch),
        "SaveState": _unary(loop, service.save_state, pb.SaveStateRequest),
        "LoadState": _unary(loop, service.load_state, pb.State),
    }
    stop = threading.Event()

    def raw(fn, stream=False):
        mk = grpc.unary_stream_rpc_method_handler if stream else grpc.unary_unary_rpc_method_handler
        return mk(fn, request_deserializer=lambda b: b, response_serializer=lambda b: b)

    # grpc.health.v1.Health/Check -> HealthCheckResponse{status: SERVING}:
    # field 1, varint 1 -> bytes 08 01.
    health = {"Check": raw(lambda req, ctx: b"\x08\x01")}

    def shutdown(req, ctx):
        stop.set()
        loop.close()
        return b""

    def stdio(req, ctx):
        # go-plugin forwards a Go plugin's stdout and stderr over this
        # stream; this SDK writes its logs to stderr directly, so the
        # stream stays open, sending nothing, until the plugin stops.
        stop.wait()
        return
        yield  # a generator

    server.add_generic_rpc_handlers((
        grpc.method_handlers_generic_handler("cde.strategy.v1.Strategy", methods),
        grpc.method_handlers_generic_handler("grpc.health.v1.Health", health),
        grpc.method_handlers_generic_handler("plugin.GRPCController", {"Shutdown": raw(shutdown)}),
        grpc.method_handlers_generic_handler("plugin.GRPCStdio", {"StreamStdio": raw(stdio, stream=True)}),
    ))

    # 2. AutoMTLS
    der, cert_pem, key_pem = self_signed_certificate()
    creds = grpc.ssl_server_credentials([(key_pem, cert_pem)], root_certificates=client_cert.encode(),
                                        require_client_auth=True)
    sock_dir = tempfile.mkdtemp(prefix="cde-py-plugin-", dir=os.environ.get("PLUGIN_UNIX_SOCKET_DIR") or None)
    sock = os.path.join(sock_dir, "plugin.sock")
    started = False
    try:
        if server.add_secure_port("unix:" + sock, creds) == 0:
            _fail("cannot listen on %s" % sock)
        server.start()
        started = True
        # 4. the handshake line:
        # CORE-PROTOCOL-VERSION|APP-PROTOCOL-VERSION|NETWORK|ADDRESS|PROTOCOL|CERT
        # with the certificate's DER in base64 without padding.
        cert_b64 = base64.b64encode(der).decode().rstrip("=")
        out = sys.stdout
        out.write("%d|%d|unix|%s|grpc|%s\n" % (CORE_PROTOCOL_VERSION, version, sock, cert_b64))
        out.flush()
        # cde-run reads no more of stdout: a print() in a hook goes to the log.
        sys.stdout = stderr
        log.debug("serving %s (protocol version %d)" % (cls.__name__, version))
        # The strategy's code runs here, on the main thread, until Shutdown.
        loop.run()
    finally:
        stop.set()
        if started:
            server.stop(grace=1).wait(2)
        shutil.rmtree(sock_dir, ignore_errors=True)
    sys.exit(0)
