"""The wire format between the grader and a sandbox: every message, field and cap, in one place.

A grading worker (`autograder.trusted.executor`) asks the runner host (`autograder.runner.host`)
to run a notebook; the host forks the notebook's confined process, which runs the cells
(`autograder.sandbox.shell`) and the scenarios (`autograder.sandbox.observe`). Everything the
sandbox can see and send is listed here. This module is imported inside the sandbox: it holds
names and numbers only, never a secret and never a judgement.

Every message is one line of JSON (a dict, ended by a newline).
"""

from __future__ import annotations

# --- The worker to the runner host: a header on its socket ----------------------------------
# With it go three descriptors: the write end of the notebook's events pipe, the write end of
# the control pipe, the read end of the payload pipe. The header holds what the host needs to
# fork the notebook, and nothing of the grader's: {"prologue_cells": [source, ...] (the shared
# prologue's cells, if any), "timeout" (seconds of CPU time a cell may use), "max_lines" (lines
# of a cell's stream output kept), "files_from" (a folder of the lesson's data files, or null)}.

# --- The worker to the notebook: its payload pipe, read only by the notebook's process -------
PAYLOAD_CELLS = "cells"  # {"cells": [[index, source], ...]}, at once
# {"observe": {"source", "filename", "runs": [[scenario, seed], ...], "mistakes", "more"}}:
# written only once the notebook has reported CELLS_DONE; "more" says that later runs follow.
PAYLOAD_OBSERVE = "observe"
# {"runs": [[scenario, seed], ...]}: the later (hidden) runs, written only once the notebook
# has reported OBSERVED, the first runs' outcomes.
PAYLOAD_RUNS = "runs"

# --- The notebook to the worker: its events pipe, {"event": NAME, ...} -----------------------
START = "start"  # index: a cell begins
DONE = "done"  # index, outputs, execution_count, timed_out, seconds: a cell ended
EXIT = "exit"  # index: the cell called exit()
CELLS_DONE = "cells-done"  # every cell has ended: the scenarios may come
OBSERVING = "observing"  # the scenarios are running the notebook's answers
OBSERVED = "observed"  # outcomes: of the first runs (the later runs' seeds follow)
OBSERVATIONS = "observations"  # outcomes: of every run
OBSERVING_TIMED_OUT = "observing-timed-out"  # its own timer stopped the scenarios
END = "end"  # it has nothing more to say
CRASH = "crash"  # detail: a traceback of its runner's own failure
NOTEBOOK_EVENTS = (START, DONE, EXIT, CELLS_DONE, OBSERVING, OBSERVED, OBSERVATIONS,
                   OBSERVING_TIMED_OUT, END, CRASH)

# --- The runner host to the worker: the control pipe (the notebook never holds it) -----------
PROLOGUE = "prologue"  # executed: [DONE message, ...] of the shared prologue's cells
PROLOGUE_LOST = "prologue-lost"  # the shared prologue could not be used: every cell runs
FORKED = "forked"  # pid, cpu_file: the notebook's process and where its CPU time is read
OOM = "oom"  # its memory reached the limit: it is being stopped
EXITED = "exited"  # pid, status, oom, memory_limit_hit: its process has been reaped
FAILED = "failed"  # detail: the host could not start it
CONTROL_EVENTS = (PROLOGUE, PROLOGUE_LOST, FORKED, OOM, EXITED, FAILED)

# --- Caps on what a notebook sends (past them it is stopped, or the excess is dropped) -------
READ_BYTES = 1 << 20  # read from a pipe at a time
MAX_EVENTS_BYTES = 96 << 20  # all of a notebook's messages together: past it, it is stopped
MAX_MESSAGE_BYTES = 48 << 20  # one message: past it, it is stopped
# Each line is counted before it is parsed (parsing builds an object per container and value:
# a 46 MiB line of nested lists took 2.6 GiB). Past its event's caps the notebook is stopped;
# a line nested deeper than any message is no message (it is ignored unparsed). The event is
# read from the line's start, as `json.dumps` writes a message: {"event": NAME, ...
MAX_MESSAGE_DEPTH = 32  # a message's nesting (an observation nests at most 8 levels)
# The outcomes (OBSERVED, OBSERVATIONS): every scenario run's observations, each at most
# 200,000 tensor elements and 10,000 other items (coursekit.scenarios). A lesson's, with its
# mistakes and three seeds per scenario, hold at most 90,000 values in 600 containers.
MAX_OUTCOMES_VALUES = 4_000_000  # containers and values
MAX_OUTCOMES_CONTAINERS = 400_000
OUTCOMES_EVENTS = (OBSERVED, OBSERVATIONS)
MAX_DONE_VALUES = 100_000  # a cell's end: its outputs (at most 500 kept) and their parts
MAX_DONE_CONTAINERS = 20_000
MAX_OTHER_EVENT_BYTES = 64 << 10  # any other event: a few fields (a crash's detail: its end)
MAX_OTHER_EVENT_VALUES = 100
MAX_STREAM_BYTES = 4_000_000  # text recorded per cell and stream (the sandbox drops the rest)
MAX_DISPLAY_BYTES = 20_000_000  # rich output recorded per cell (the sandbox drops the rest)
MAX_OUTPUTS = 500  # outputs of a cell kept
MAX_TEXT_CHARS = 4_000_000  # characters of a stream's text kept
MAX_ENAME_CHARS = 200  # characters of an error's name kept
MAX_EVALUE_CHARS = 20_000  # characters of an error's value, and of each traceback line, kept
MAX_TRACEBACK_LINES = 200  # lines of an error's traceback kept
MAX_DATA_CHARS = 20_000_000  # characters of one MIME type of a display kept
SAFE_MIME = ("text/plain", "image/png", "image/jpeg")  # the only display types kept
MAX_EXECUTION_COUNT = 10 ** 9  # a larger (or a negative) execution count is dropped
MAX_CRASH_CHARS = 2000  # characters of a crash's detail kept (its end)
