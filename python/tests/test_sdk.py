"""Unit tests of the SDK's Python side (go test runs them: plugins/python_test.go
TestPythonSDKUnit). The protocol itself is tested through cde-run's host."""
import fcntl
import json
import mmap
import os
import sys
import threading
import unittest

import grpc
import numpy as np

import cde_plugin
from cde_plugin import _server
from cde_plugin import _shm
from cde_plugin import cde_strategy_pb2 as pb
from cde_plugin.testing import make_batch, make_info


class BatchTest(unittest.TestCase):
    def test_undeclared_signal(self):
        # A hook reading a signal its needs do not declare gets an error
        # naming the signal and the flag, not None (whose TypeError, "'NoneType'
        # object is not iterable", said neither).
        kw = dict(entropies=[[1, 2]], values=[[[1], [2]]], value_heads=1, embedding=[[1, 2]])
        for signal, flag in (("entropies", "entropies=True"), ("values", "value_heads=K"), ("embedding", "embeddings=True")):
            b = make_batch([2], needs=cde_plugin.Needs(), **kw)
            with self.assertRaises(cde_plugin.UndeclaredSignal) as cm:
                getattr(b, signal)
            self.assertIn("batch.%s was not sent" % signal, str(cm.exception))
            self.assertIn("cde_plugin.Needs(%s)" % flag, str(cm.exception))
            self.assertIsNone(getattr(b, signal, None))  # an AttributeError
        with self.assertRaises(cde_plugin.UndeclaredSignal):
            make_batch([2], needs=cde_plugin.Needs(), **kw).flat("entropies")
        b = make_batch([2], needs=cde_plugin.Needs(entropies=True, value_heads=1, embeddings=True), **kw)
        self.assertEqual([list(x) for x in b.entropies], [[1, 2]])
        self.assertEqual(b.values[0].shape, (2, 1))
        self.assertEqual(b.embedding.shape, (1, 2))
        # Declared but not sent (no critic this step): None, as before.
        self.assertIsNone(make_batch([2], needs=cde_plugin.Needs(entropies=True)).entropies)

    def test_info_max_response_tokens(self):
        # The host's StepInfo carries rollout.max_response_tokens; an old
        # host's message lacks it and reads 0.
        sv = _server._Service.__new__(_server._Service)
        i = sv._info(pb.StepInfo(step=3, total_steps=9, algorithm="grpo", seed=5, max_response_tokens=512), 0)
        self.assertEqual((i.step, i.total_steps, i.seed, i.max_response_tokens), (3, 9, 5, 512))
        self.assertEqual(sv._info(pb.StepInfo(step=1), 0).max_response_tokens, 0)
        self.assertEqual(make_info(max_response_tokens=64).max_response_tokens, 64)

    def test_needs_fields(self):
        n = cde_plugin.Needs(correct=True, min_group=4, min_group_key="k")
        self.assertEqual((n.correct, n.min_group, n.min_group_key), (True, 4, "k"))
        self.assertIn("min_group=4", repr(n))
        for bad in (-1, 1.5):
            with self.assertRaises(ValueError):
                cde_plugin.Needs(min_group=bad)

    def test_fields(self):
        b = make_batch([3, 0, 2], reward=[1, -1, 0.5], group=[0, 0, 1], entropies=[[1, 2, 3], [], [4, 5]],
                       values=[[[1, 2]] * 3, [], [[3, 4]] * 2], value_heads=2, embedding=[[1, 2], [3, 4], [5, 6]],
                       text=["a", "b", "c"])
        self.assertEqual(len(b), 3)
        np.testing.assert_array_equal(b.lengths, [3, 0, 2])
        np.testing.assert_array_equal(b.group, [0, 0, 1])
        self.assertEqual(b.text, ["a", "b", "c"])
        self.assertEqual([len(x) for x in b.logprobs], [3, 0, 2])
        np.testing.assert_array_equal(b.entropies[2], [4, 5])
        self.assertEqual(b.values[0].shape, (3, 2))
        np.testing.assert_array_equal(b.values[2][1], [3, 4])
        self.assertEqual(b.embedding.shape, (3, 2))
        self.assertIsNone(b.advantages)
        np.testing.assert_array_equal(b.flat("entropies"), [1, 2, 3, 4, 5])
        with self.assertRaises(ValueError):  # read-only
            b.reward[0] = 2
        with self.assertRaises(AttributeError):
            b.nonsense
        # Keys the host did not send read as "" for every sequence.
        self.assertEqual(b.answer_key, ["", "", ""])
        self.assertEqual(b.solution_key, ["", "", ""])
        k = make_batch([1, 1], answer_key=["24", ""], solution_key=["3*8", ""])
        self.assertEqual(k.answer_key, ["24", ""])
        self.assertEqual(k.solution_key, ["3*8", ""])

    def test_token_rows(self):
        # Without an answer region: zeroed rows of T_i * width values,
        # views of one array in the batch's order.
        b = make_batch([2, 0, 3])
        rows = b.token_rows()
        self.assertEqual([len(r) for r in rows], [2, 0, 3])
        rows[2][0] = 7
        self.assertIs(rows[0].base, rows[2].base)  # one flat array
        self.assertEqual(rows[2].base.tolist(), [0, 0, 7, 0, 0])  # tokens 0-1, then 2-4
        wide = b.token_rows(width=4)
        self.assertEqual([len(r) for r in wide], [8, 0, 12])
        self.assertEqual(float(np.sum(np.concatenate(wide))), 0.0)

    def test_rows_in_place(self):
        # Rows already at their place in the destination are not copied;
        # rows of the destination in another order are read before any
        # write.
        dst = np.arange(5, dtype=np.float64)
        r = _server._Rows([dst[0:2], dst[2:5]], [2, 3], "x")
        self.assertTrue(r._in_place(dst))
        r.into(dst)
        np.testing.assert_array_equal(dst, [0, 1, 2, 3, 4])
        swapped = _server._Rows([dst[3:5], dst[0:3]], [2, 3], "x")
        self.assertFalse(swapped._in_place(dst))
        swapped.into(dst)
        np.testing.assert_array_equal(dst, [3, 4, 0, 1, 2])
        heap = _server._Rows([np.ones(2), np.full(3, 2.0)], [2, 3], "x")
        heap.into(dst)
        np.testing.assert_array_equal(dst, [1, 1, 2, 2, 2])
        bad = _server._Rows([dst[0:2], np.array([1.0, np.nan, 1.0])], [2, 3], "x")
        with self.assertRaises(_server._HookError):
            bad.into(dst)

    def test_bonuses_and_returns(self):
        # make_batch sets what the trainer has by a later hook: the reward
        # bonus (shaped reward = reward + bonus unless given), the
        # advantage bonus and the returns.
        b = make_batch([2, 1], reward=[1, -1], reward_bonus=[0.5, 0.25], advantages=[[1, 2], [3]],
                       advantage_bonus=[[0.1, 0.2], [0.3]], returns=[[4, 5], [6]])
        np.testing.assert_array_equal(b.reward_bonus, [0.5, 0.25])
        np.testing.assert_array_equal(b.shaped_reward, [1.5, -0.75])
        np.testing.assert_array_equal(b.advantage_bonus[0], [0.1, 0.2])
        np.testing.assert_array_equal(b.returns[1], [6])
        np.testing.assert_array_equal(b.flat("returns"), [4, 5, 6])
        self.assertEqual(list(make_batch([1], reward=[1], shaped_reward=[3]).shaped_reward), [3])
        d = make_batch([2])
        self.assertIsNone(d.advantage_bonus)
        self.assertIsNone(d.returns)
        np.testing.assert_array_equal(d.reward_bonus, [0])
        with self.assertRaises(ValueError):
            make_batch([2], returns=[[1]])
        with self.assertRaises(ValueError):
            make_batch([2, 2], reward_bonus=[1])


class Bonus(cde_plugin.Strategy):
    name = "bonus"

    def __init__(self, params):
        self.scale = float(params.get("scale", 1))
        if self.scale <= 0:
            raise cde_plugin.ParamError("scale", "must be > 0, got %r" % self.scale)
        self.answer = None

    def reward_bonus(self, info, batch):
        return self.answer if self.answer is not None else self.scale * batch.lengths

    def advantage_bonus(self, info, batch):
        return self.answer


def configure(params, path="strategies[0].params"):
    s = _server._Service(Bonus, 2)
    return s, s.configure(pb.ConfigureRequest(params_json=json.dumps(params), params_path=path, algorithm="grpo"))


class ServiceTest(unittest.TestCase):
    def test_params(self):
        _, (desc, err) = configure({"scale": 2})
        self.assertIsNone(err)
        self.assertEqual(desc.name, "bonus")
        self.assertTrue(desc.capabilities.reward_bonus and desc.capabilities.advantage_bonus)
        self.assertFalse(desc.capabilities.observe or desc.capabilities.state or desc.capabilities.token_loss)
        _, (_, err) = configure({"scale": -1})
        self.assertEqual(err, (grpc.StatusCode.INVALID_ARGUMENT, "config: strategies[0].params.scale: must be > 0, got -1.0"))
        _, (_, err) = configure({"scale": 1, "scael": 2})
        self.assertEqual(err, (grpc.StatusCode.INVALID_ARGUMENT,
                               "config: strategies[0].params.scael: unknown key (known keys here: scale)"))

    def test_params_every_reading_idiom_counts(self):
        # A constructor may read its params any way a mapping is read; the
        # keys it read that way are known, and a key it never read is
        # still refused by name.
        idioms = {
            "dict(params)": lambda p: dict(p),
            "{**params}": lambda p: {**p},
            "update": lambda p: {"beta": 0}.update(p),
            "items": lambda p: list(p.items()),
            "values": lambda p: list(p.values()),
            "copy": lambda p: p.copy(),
            "[]": lambda p: (p["beta"], p["gamma"]),
            "get": lambda p: (p.get("beta"), p.get("gamma", 1)),
            "in": lambda p: ("beta" in p, "gamma" in p),
            "pop": lambda p: (p.pop("beta"), p.pop("gamma", None)),
        }
        for name, read in idioms.items():
            class Reader(cde_plugin.Strategy):
                name = "reader"

                def __init__(self, params, read=read):
                    read(params)

            s = _server._Service(Reader, 2)
            _, err = s.configure(pb.ConfigureRequest(params_json=json.dumps({"beta": 0.1, "gamma": 2}), params_path="strategies[0].params"))
            self.assertIsNone(err, name)

        class OnlyBeta(cde_plugin.Strategy):
            name = "onlybeta"

            def __init__(self, params):
                self.beta = params.get("beta", 0.1)

        s = _server._Service(OnlyBeta, 2)
        _, err = s.configure(pb.ConfigureRequest(params_json=json.dumps({"beta": 0.1, "gamma": 2}), params_path="strategies[0].params"))
        self.assertEqual(err, (grpc.StatusCode.INVALID_ARGUMENT, "config: strategies[0].params.gamma: unknown key (known keys here: beta)"))
        # Listing the keys alone reads no value.
        self.assertEqual(sorted(_server._Params({"a": 1})), ["a"])
        p = _server._Params({"a": 1})
        list(p)
        self.assertEqual(p.read, set())

    def test_answers_checked(self):
        s, _ = configure({})
        msg = make_batch([2, 3])._msg
        resp, err = s.reward_bonus(msg)
        self.assertIsNone(err)
        self.assertEqual(list(resp.bonus), [2.0, 3.0])
        for answer, want in [([1.0], "want 2 floats (one per sequence), got 1"),
                             ([1.0, float("nan")], "entry 1 is nan, not finite"),
                             ([[1.0, 2.0]], "want a 1-D array of floats, got shape (1, 2)"),
                             ("xy", "want floats, got str")]:
            s.s.answer = answer
            _, err = s.reward_bonus(msg)
            self.assertEqual(err[0], grpc.StatusCode.ABORTED)
            self.assertIn(want, err[1])
        s.s.answer = [np.zeros(2), np.zeros(4)]
        _, err = s.advantage_bonus(msg)
        self.assertIn("advantage_bonus[1]: want 3 floats (the sequence's tokens), got shape (4,)", err[1])
        s.s.answer = [np.zeros(2), np.ones(3)]
        resp, err = s.advantage_bonus(msg)
        self.assertEqual((list(resp.lengths), list(resp.bonus)), ([2, 3], [0, 0, 1, 1, 1]))
        _, err = s.observe(msg)
        self.assertEqual(err, (grpc.StatusCode.UNIMPLEMENTED, "the strategy does not implement observe"))



class MainLoopTest(unittest.TestCase):
    """The strategy's code runs on the main thread: gRPC's worker threads
    hand each call to _MainLoop and wait for its answer."""

    def serve_calls(self, loop, fn, requests):
        answers = []

        def caller(r):
            answers.append(loop.call(fn, r))

        threads = [threading.Thread(target=caller, args=(r,)) for r in requests]
        for t in threads:
            t.start()

        def closer():
            for t in threads:
                t.join()
            loop.close()

        threading.Thread(target=closer).start()
        return answers, threads

    def test_calls_run_on_the_main_thread(self):
        loop = _server._MainLoop()
        seen = []

        def fn(r):
            seen.append(threading.get_ident())
            return r * 2, None

        answers, _ = self.serve_calls(loop, fn, range(8))
        loop.run()  # unittest runs this on the main thread
        self.assertEqual(set(seen), {threading.main_thread().ident})
        self.assertEqual(sorted(a for a, _ in answers), [2 * r for r in range(8)])

    def test_errors(self):
        loop = _server._MainLoop()

        def reward_bonus(r):
            raise ValueError("bad %d" % r)

        answers, _ = self.serve_calls(loop, reward_bonus, [1])
        loop.run()
        self.assertEqual(answers, [(None, (grpc.StatusCode.ABORTED, "reward_bonus: ValueError: bad 1"))])

        loop = _server._MainLoop()

        def exits(r):
            sys.exit(r)

        answers, threads = self.serve_calls(loop, exits, [3])
        with self.assertRaises(SystemExit):
            loop.run()
        for t in threads:
            t.join()
        self.assertEqual(answers, [(None, (grpc.StatusCode.UNAVAILABLE, "the plugin is exiting: SystemExit: 3"))])


# --- the shared-memory transport (protocol version 3) --------------------------

F_SEAL_FUTURE_WRITE = getattr(fcntl, "F_SEAL_FUTURE_WRITE", 0x0010)
HAVE_MEMFD = sys.platform.startswith("linux") and hasattr(os, "memfd_create")


class Region:
    """A region as the host makes it: a memfd this process maps read-write,
    sealed against resizing (and, for an input region, against new
    writers), handed over as /proc/<pid>/fd/<fd>."""

    _ids = 0

    def __init__(self, size, input=True):
        self.fd = os.memfd_create("cde-test", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        os.ftruncate(self.fd, size)
        self.size = size
        self.mem = mmap.mmap(self.fd, size)  # the host's own, writable mapping
        seals = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
        if input:
            seals |= F_SEAL_FUTURE_WRITE
        fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, seals)
        Region._ids += 1
        self.id = Region._ids

    def proto(self):
        return pb.ShmRegion(path="/proc/%d/fd/%d" % (os.getpid(), self.fd), size=self.size, id=self.id)

    def floats(self, offset, count):
        return np.frombuffer(self.mem, dtype="<f8", count=count, offset=offset)

    def close(self):
        os.close(self.fd)  # the mapping keeps the memfd alive


SHM_FIELDS = {"prompt": (20, 1, "<i4"), "response": (21, 1, "<i4"), "logprobs": (30, 2, "<f8"),
              "entropies": (31, 2, "<f8"), "values": (32, 2, "<f8"), "advantages": (33, 2, "<f8"),
              "advantage_bonus": (34, 2, "<f8"), "returns": (35, 2, "<f8"), "embedding": (41, 2, "<f8")}


def to_shm(msg, answer_size=0, pad=0):
    """msg with its large arrays moved into a new input region (64-byte
    aligned, as the host places them), and an answer region of
    answer_size bytes when > 0: (message, input Region, answer Region)."""
    out = pb.Batch()
    out.CopyFrom(msg)
    parts, off = [], 0
    for name, (field, dtype, np_dtype) in SHM_FIELDS.items():
        vals = getattr(msg, name)
        if len(vals) == 0:
            continue
        a = np.fromiter(vals, np_dtype, count=len(vals))
        parts.append((name, field, dtype, off, a))
        off += (a.nbytes + 63) // 64 * 64
    region = Region(max(off + pad, 4096))
    arrays = []
    for name, field, dtype, o, a in parts:
        region.mem[o:o + a.nbytes] = a.tobytes()  # after sealing: the host's mapping stays writable
        out.ClearField(name)
        arrays.append(pb.ShmArray(field=field, dtype=dtype, offset=o, count=len(a), generation=1))
    out.shm.input.CopyFrom(region.proto())
    out.shm.arrays.extend(arrays)
    answer = None
    if answer_size > 0:
        answer = Region(answer_size, input=False)
        out.shm.answer.CopyFrom(answer.proto())
    return out, region, answer


def same_bits(a, b):
    """a and b are the same arrays bit for bit (and the same dtype)."""
    if a is None or b is None:
        return a is None and b is None
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def rich_batch():
    return make_batch([3, 0, 5], reward=[1, -1, 0.5], group=[0, 0, 1], prompt_lengths=[2, 4, 1],
                      logprobs=[[-0.5, -0.0, -2.25], [], [-1e-300, -3, -4, -5, -6.5]],
                      entropies=[[1, 2, 3], [], [4, 5, 6, float("nan"), 8]],
                      advantages=[[0.1, 0.2, 0.3], [], [0.4, 0.5, 0.6, 0.7, 0.8]],
                      values=[np.arange(6.0).reshape(3, 2), np.zeros((0, 2)), np.arange(10.0).reshape(5, 2) / 3],
                      value_heads=2, embedding=[[1, 2, 3], [4, 5, 6], [7, 8, 9.5]])


@unittest.skipUnless(HAVE_MEMFD, "shared memory is Linux only (os.memfd_create)")
class ShmBatchTest(unittest.TestCase):
    def setUp(self):
        self.regions = []

    def tearDown(self):
        for r in self.regions:
            if r is not None:
                r.close()

    def shm(self, msg, **kw):
        out, region, answer = to_shm(msg, **kw)
        self.regions += [region, answer]
        return out, region, answer

    def test_same_arrays_as_message(self):
        msg = rich_batch()._msg
        msg.prompt[:] = [7, 8, 9, 10, 11, 12, 2**31 - 1]
        msg.response[:] = [1, 2, 3, 4, 5, 6, 7, 8]
        msg.returns.extend([0.5] * 8)
        smsg, _, _ = self.shm(msg)
        self.assertEqual([a.field for a in smsg.shm.arrays], [20, 21, 30, 31, 32, 33, 35, 41])
        self.assertEqual(len(smsg.logprobs), 0)
        want, got = cde_plugin.Batch(msg), cde_plugin.Batch(smsg, _shm.Regions())
        for name in ("prompt", "response", "logprobs", "entropies", "values", "advantages", "advantage_bonus", "returns",
                     "embedding"):
            self.assertTrue(same_bits(got.flat(name), want.flat(name)), name)
        for name in ("prompt", "response", "logprobs", "entropies", "values", "advantages", "returns"):
            w, g = getattr(want, name), getattr(got, name)
            self.assertEqual(len(g), len(w), name)
            for i, (x, y) in enumerate(zip(g, w)):
                self.assertTrue(same_bits(x, y), "%s[%d]" % (name, i))
        self.assertIsNone(got.advantage_bonus)
        self.assertEqual(got.values[2].shape, (5, 2))
        self.assertTrue(same_bits(got.embedding, want.embedding))
        self.assertEqual(got.embedding.shape, (3, 3))
        self.assertEqual(got.response[0].dtype, np.int32)
        self.assertEqual(want.response[0].dtype, np.int32)  # the message path gives token ids as int32 too
        for name in ("group", "reward", "lengths", "prompt_lengths", "correct"):
            self.assertTrue(same_bits(getattr(got, name), getattr(want, name)), name)

    def test_arrays_read_only(self):
        smsg, region, _ = self.shm(rich_batch()._msg)
        b = cde_plugin.Batch(smsg, _shm.Regions())
        for name in ("logprobs", "entropies", "prompt", "response"):
            with self.assertRaises(ValueError, msg=name):
                getattr(b, name)[0][0] = 1
        with self.assertRaises(ValueError):
            b.values[0][0, 0] = 1
        with self.assertRaises(ValueError):
            b.embedding[0, 0] = 1
        with self.assertRaises(ValueError):
            b.flat("logprobs").flags.writeable = True  # the view of a read-only mapping cannot be made writable
        # What the host writes is what the plugin reads (no copy).
        lp = b.flat("logprobs")
        off = [a.offset for a in smsg.shm.arrays if a.field == 30][0]
        region.floats(off, 1)[0] = 42.0
        self.assertEqual(lp[0], 42.0)

    def test_probe_region_read_only(self):
        probe = Region(4096)
        self.regions.append(probe)
        probe.mem[:8] = _shm.MAGIC
        m = _shm.map_region(probe.proto())
        self.assertEqual(m[:8], _shm.MAGIC)
        a = np.frombuffer(m, dtype=np.uint8)
        self.assertFalse(a.flags.writeable)
        with self.assertRaises(ValueError):
            a[0] = 1
        with self.assertRaises(TypeError):
            m[0] = 1
        # The seals keep a plugin from mapping the input region writable
        # even when it asks.
        with self.assertRaises(_shm.RegionError) as e:
            _shm.map_region(probe.proto(), writable=True)
        self.assertIn("mmap", str(e.exception))

    def lie(self, mutate, want):
        msg = rich_batch()._msg
        smsg, _, _ = self.shm(msg)
        mutate(smsg)
        with self.assertRaises(_shm.BatchError) as e:
            cde_plugin.Batch(smsg, _shm.Regions())
        self.assertIn(want, str(e.exception))
        # Through the service: INVALID_ARGUMENT with the same message,
        # before the hook runs.
        s = _server._Service(Bonus, 3)
        self.assertIsNone(s.configure(pb.ConfigureRequest(params_json="{}"))[1])
        s.s.answer = [np.zeros(3), np.zeros(0), np.zeros(5)]
        resp, err = s.advantage_bonus(smsg)
        self.assertIsNone(resp)
        self.assertEqual(err, (grpc.StatusCode.INVALID_ARGUMENT, str(e.exception)))
        return str(e.exception)

    def arr(self, smsg, field):
        return [a for a in smsg.shm.arrays if a.field == field][0]

    def test_lying_headers(self):
        def beyond(m):
            self.arr(m, 30).offset = m.shm.input.size - 16
        msg = self.lie(beyond, "shm: logprobs (field 30): offset 4080 + 64 bytes exceeds the region's 4096 bytes")

        def huge(m):
            self.arr(m, 31).count = 1 << 62
        self.lie(huge, "shm: entropies (field 31): offset ")

        def size(m):
            m.shm.input.size = 1 << 40
        self.lie(size, "shm: input region: ")

        def dtype(m):
            self.arr(m, 32).dtype = pb.ShmArray.INT32
        self.lie(dtype, "shm: values (field 32): element type INT32, want FLOAT64")

        def dtype0(m):
            self.arr(m, 20).dtype = pb.ShmArray.DTYPE_UNSPECIFIED
        self.lie(dtype0, "shm: prompt (field 20): element type DTYPE_UNSPECIFIED, want INT32")

        def unknown(m):
            m.shm.arrays.add(field=12, dtype=pb.ShmArray.FLOAT64, offset=0, count=3)
        self.lie(unknown, "shm: field 12 is not a Batch field")

        def twice(m):
            m.shm.arrays.append(self.arr(m, 33))
        self.lie(twice, "shm: advantages (field 33): listed twice")

        def both(m):
            m.embedding.extend([0.0] * 9)
        self.lie(both, "shm: embedding (field 41): also sent in the message (9 entries)")

        def misaligned(m):
            self.arr(m, 30).offset += 4
        self.lie(misaligned, "shm: logprobs (field 30): offset ")

        def count(m):
            self.arr(m, 21).count -= 1
        self.lie(count, "shm: response (field 21): 7 entries, want 8")

        def path(m):
            r = m.shm.input
            r.path = "/proc/%d/fd/../fd/%s" % (os.getpid(), r.path.rsplit("/", 1)[1])
        self.lie(path, "is not /proc/<pid>/fd/<fd>")

        def missing(m):
            m.shm.input.path = "/proc/%d/fd/999999" % os.getpid()
        self.lie(missing, "shm: input region: open /proc/")
        self.assertIn("4080", msg)

    def test_regions_replaced(self):
        regions = _shm.Regions()
        m1, _, _ = self.shm(rich_batch()._msg)
        lp1 = cde_plugin.Batch(m1, regions).flat("logprobs")
        first = regions._maps["input"][1]
        # The same region again: the mapping is reused.
        cde_plugin.Batch(m1, regions).flat("logprobs")
        self.assertIs(regions._maps["input"][1], first)
        # A new region (a new id): the old mapping is dropped, not closed,
        # and the arrays made from it still read it.
        m2, _, _ = self.shm(rich_batch()._msg)
        self.assertNotEqual(m2.shm.input.id, m1.shm.input.id)
        lp2 = cde_plugin.Batch(m2, regions).flat("logprobs")
        self.assertIsNot(regions._maps["input"][1], first)
        self.assertEqual(regions._maps["input"][0][0], m2.shm.input.id)
        self.assertFalse(first.closed)
        self.assertTrue(same_bits(lp1, lp2))
        self.assertEqual(float(lp1[0]), -0.5)


class TokenLossStrategy(cde_plugin.Strategy):
    name = "tl"

    def __init__(self, params):
        self.pg = self.kl = None

    def token_loss(self, info, batch):
        return cde_plugin.TokenLoss(pg_weight=self.pg, abs_kl_coef=self.kl, entropy_coef=0.25)


def rows(lengths, scale):
    return [scale * (np.arange(t) + 1) + i for i, t in enumerate(lengths)]


class PackedTest(unittest.TestCase):
    """Answers in the message are built from the doubles' bytes
    (_server._set_doubles): the same message as assigning the list."""

    def test_message_answers_unchanged(self):
        # The packed bytes give the message that assigning the list gave.
        s = _server._Service(TokenLossStrategy, 2)
        self.assertIsNone(s.configure(pb.ConfigureRequest(params_json="{}"))[1])
        msg = make_batch([3, 0, 5])._msg
        s.s.pg, s.s.kl = rows([3, 0, 5], 1 / 3), rows([3, 0, 5], -1e-310)
        got, err = s.token_loss(msg)
        self.assertIsNone(err)
        want = pb.TokenLossResponse(has_pg_weight=True, pg_weight=np.concatenate(s.s.pg).tolist(), has_abs_kl_coef=True,
                                    abs_kl_coef=np.concatenate(s.s.kl).tolist(), entropy_coef=0.25)
        self.assertEqual(got.SerializeToString(), want.SerializeToString())
        self.assertFalse(got.in_shm)
        for n in (0, 1, 15, 16, 2000, 131072):
            a = np.random.default_rng(n).standard_normal(n)
            r = pb.AdvantageBonusResponse(lengths=[n])
            _server._set_doubles(r, 2, a)
            self.assertEqual(r.SerializeToString(), pb.AdvantageBonusResponse(lengths=[n], bonus=a.tolist()).SerializeToString())


@unittest.skipUnless(HAVE_MEMFD, "shared memory is Linux only (os.memfd_create)")
class ShmAnswerTest(unittest.TestCase):
    LENGTHS = [3, 0, 5]

    def setUp(self):
        self.regions = []

    def tearDown(self):
        for r in self.regions:
            if r is not None:
                r.close()

    def service(self, cls):
        s = _server._Service(cls, 3)
        self.assertIsNone(s.configure(pb.ConfigureRequest(params_json="{}"))[1])
        return s

    def test_advantage_bonus(self):
        s = self.service(Bonus)
        s.s.answer = rows(self.LENGTHS, 0.5)
        s.s.answer[0][1] = -0.0
        msg = make_batch(self.LENGTHS)._msg
        want, err = s.advantage_bonus(msg)
        self.assertIsNone(err)
        smsg, _, ans = to_shm(msg, answer_size=4096)
        self.regions += [ans]
        got, err = s.advantage_bonus(smsg)
        self.assertIsNone(err)
        self.assertTrue(got.in_shm)
        self.assertEqual(len(got.bonus), 0)
        self.assertEqual(list(got.lengths), self.LENGTHS)
        self.assertTrue(same_bits(ans.floats(0, 8), np.fromiter(want.bonus, np.float64)))
        # An answer region too small for the answer: the message, as
        # without shared memory.
        smsg2, _, small = to_shm(msg, answer_size=8 * 7)
        self.regions += [small]
        with self.assertLogs("cde_plugin", "WARNING") as logs:
            got2, err = s.advantage_bonus(smsg2)
        self.assertIsNone(err)
        self.assertIn("the answer region has 56 bytes, the answer 64", logs.output[0])
        self.assertEqual(got2.SerializeToString(), want.SerializeToString())

    def test_token_loss(self):
        s = self.service(TokenLossStrategy)
        msg = make_batch(self.LENGTHS)._msg
        total = sum(self.LENGTHS)
        for pg, kl in [(rows(self.LENGTHS, 1.0), None), (None, rows(self.LENGTHS, 0.1)),
                       (rows(self.LENGTHS, 2.0), rows(self.LENGTHS, 0.3)), (None, None)]:
            s.s.pg, s.s.kl = pg, kl
            want, err = s.token_loss(msg)
            self.assertIsNone(err)
            smsg, _, ans = to_shm(msg, answer_size=16 * total)
            self.regions += [ans]
            ans.mem[:] = b"\xff" * ans.size  # what the plugin does not write stays as it was
            got, err = s.token_loss(smsg)
            self.assertIsNone(err)
            self.assertEqual((got.has_pg_weight, got.has_abs_kl_coef, got.entropy_coef),
                             (pg is not None, kl is not None, 0.25))
            self.assertEqual(got.in_shm, pg is not None or kl is not None)
            self.assertEqual((len(got.pg_weight), len(got.abs_kl_coef)), (0, 0))
            untouched = b"\xff" * (8 * total)
            pg_bytes, kl_bytes = bytes(ans.mem[:8 * total]), bytes(ans.mem[8 * total:16 * total])
            self.assertEqual(pg_bytes, np.fromiter(want.pg_weight, "<f8").tobytes() if pg is not None else untouched)
            self.assertEqual(kl_bytes, np.fromiter(want.abs_kl_coef, "<f8").tobytes() if kl is not None else untouched)
            # Without the answer region: the message, as before version 3.
            smsg.shm.ClearField("answer")
            got, err = s.token_loss(smsg)
            self.assertEqual(got.SerializeToString(), want.SerializeToString())


@unittest.skipUnless(HAVE_MEMFD, "shared memory is Linux only (os.memfd_create)")
class ShmProbeTest(unittest.TestCase):
    def configure(self, probe, version=3):
        s = _server._Service(Bonus, version)
        req = pb.ConfigureRequest(params_json="{}")
        if probe is not None:
            req.shm_probe.CopyFrom(probe)
        desc, err = s.configure(req)
        self.assertIsNone(err)
        self.assertEqual(desc.protocol_version, version)
        self.assertEqual(s.describe(None)[0].shm, desc.shm)
        return desc.shm

    def test_probe(self):
        r = Region(4096)
        self.addCleanup(r.close)
        r.mem[:8] = _shm.MAGIC
        self.assertTrue(self.configure(r.proto()))
        self.assertFalse(self.configure(None))
        self.assertFalse(self.configure(r.proto(), version=2))  # version 2 has no shared memory
        bad = [("missing", pb.ShmRegion(path="/proc/%d/fd/999999" % os.getpid(), size=4096, id=1), "open /proc/"),
               ("not /proc", pb.ShmRegion(path="/tmp/x", size=4096, id=1), "is not /proc/<pid>/fd/<fd>"),
               ("too large", pb.ShmRegion(path=r.proto().path, size=8192, id=1), "has 4096 bytes, the host announced 8192"),
               ("empty", pb.ShmRegion(path=r.proto().path, size=0, id=1), "size 0")]
        w = Region(4096)
        self.addCleanup(w.close)
        w.mem[:8] = b"CDESHM02"
        bad.append(("magic", w.proto(), "does not start with b'CDESHM01' (got b'CDESHM02')"))
        for what, probe, want in bad:
            with self.assertLogs("cde_plugin", "WARNING") as logs:
                self.assertFalse(self.configure(probe), what)
            self.assertIn(want, logs.output[0], what)

    def test_versions(self):
        self.assertEqual(_server.PROTOCOL_VERSIONS, (1, 2, 3))


if __name__ == "__main__":
    unittest.main()
