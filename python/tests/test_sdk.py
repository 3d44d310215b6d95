"""Unit tests of the SDK's Python side (go test runs them: plugins/python_test.go
TestPythonSDKUnit). The protocol itself is tested through cde-run's host."""
import json
import unittest

import grpc
import numpy as np

import cde_plugin
from cde_plugin import _server
from cde_plugin import cde_strategy_pb2 as pb
from cde_plugin.testing import make_batch, make_info


class BatchTest(unittest.TestCase):
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
        self.assertEqual(b.response[0].dtype, np.int32)  # token ids as on the wire
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


if __name__ == "__main__":
    unittest.main()
