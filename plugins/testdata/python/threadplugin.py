#!/usr/bin/env python3
"""A Python test plugin of plugins/python_test.go (TestPythonHooksOnOneThread):
its __init__ installs a SIGUSR1 handler (signal.signal works only on the
main thread) and sets thread-local state; every hook records the thread
it runs on, checks that state, prints a line and sends itself SIGUSR1.
observe reports what it saw: threads (distinct threads of __init__ and
the hooks), on_main (1 when every one was the main thread), local (1 when
the thread-local state set in __init__ was there in every hook) and
signals (SIGUSR1 handled so far, the host's included).
"""
import os
import signal
import threading

import cde_plugin


class ThreadPlugin(cde_plugin.Strategy):
    name = "pythread"
    needs = cde_plugin.Needs()

    def __init__(self, params):
        self.signals = 0
        signal.signal(signal.SIGUSR1, self._on_signal)
        self.local = threading.local()
        self.local.tag = "set in __init__"
        self.threads = {threading.get_ident()}
        self.local_ok = True

    def _on_signal(self, signum, frame):
        self.signals += 1

    def _hook(self, name):
        self.threads.add(threading.get_ident())
        if getattr(self.local, "tag", None) != "set in __init__":
            self.local_ok = False
        print("pythread: %s ran" % name)
        os.kill(os.getpid(), signal.SIGUSR1)

    def reward_bonus(self, info, batch):
        self._hook("reward_bonus")
        return 0.0 * batch.lengths

    def advantage_bonus(self, info, batch):
        self._hook("advantage_bonus")
        return [[0.0] * t for t in batch.lengths]

    def loss_terms(self, info):
        self._hook("loss_terms")
        return cde_plugin.LossTerms()

    def observe(self, info, batch):
        self._hook("observe")
        main = threading.main_thread().ident
        return {"threads": len(self.threads), "on_main": float(self.threads == {main}),
                "local": float(self.local_ok), "signals": self.signals}

    def save_state(self):
        self._hook("save_state")
        return b""

    def load_state(self, data):
        self._hook("load_state")


if __name__ == "__main__":
    cde_plugin.serve(ThreadPlugin)
