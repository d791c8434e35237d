"""What the grader writes to a notebook: its payload pipe, one message at a time, when due.

The notebook's process reads its cells first; the scenarios (with the visible runs' seeds)
only once every cell has ended, and the later runs' seeds only once it has reported the first
runs' outcomes (`autograder.protocol`). The runner host never reads this pipe.
"""

from __future__ import annotations

import json
import os
import threading

from autograder import protocol


class Payload:
    """Writes a notebook's payload from a thread (a pipe holds 64 KiB; a notebook may be
    larger): its cells at once, its scenarios only when `release()` says the cells are done,
    and the later runs (the hidden ones) only when `release_later()` says that the first
    runs' outcomes are in."""

    def __init__(self, fd: int, request: dict) -> None:
        self.fd = fd
        self.ready = threading.Event()
        self.later_ready = threading.Event()
        self.closed = threading.Event()
        self.cells = (json.dumps({protocol.PAYLOAD_CELLS: request["cells"]}) + "\n").encode()
        observe = request.get("observe")
        later = observe.get("later") if observe else None
        if observe:  # what the notebook reads first holds no later run's seed
            observe = dict({k: v for k, v in observe.items() if k != "later"},
                           more=bool(later))
        self.observe = (json.dumps({protocol.PAYLOAD_OBSERVE: observe}) + "\n").encode()
        self.later = ((json.dumps({protocol.PAYLOAD_RUNS: later}) + "\n").encode()
                      if later else None)
        self.thread = threading.Thread(target=self._write, daemon=True)
        self.thread.start()

    def _send(self, data: bytes) -> bool:
        try:
            while data and not self.closed.is_set():
                data = data[os.write(self.fd, data):]
        except OSError:
            return False
        return not data

    def _write(self) -> None:
        if self._send(self.cells):
            self.ready.wait()
            if not self.closed.is_set() and self._send(self.observe) and self.later:
                self.later_ready.wait()
                if not self.closed.is_set():
                    self._send(self.later)
        try:
            os.close(self.fd)
        except OSError:
            pass

    def release(self) -> None:
        self.ready.set()

    def release_later(self) -> None:
        self.later_ready.set()

    def close(self) -> None:
        self.closed.set()
        self.ready.set()
        self.later_ready.set()
        self.thread.join(5)
