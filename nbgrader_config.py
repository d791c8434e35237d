"""nbgrader configuration for the course; the repository root is nbgrader's course root."""

import os

import nbgrader
from nbconvert.preprocessors import ClearMetadataPreprocessor
from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, ClearHiddenTests,
                                    ClearOutput, DeduplicateIds, Execute, GetGrades,
                                    IgnorePattern, LimitOutput, OverwriteKernelspec,
                                    SaveAutoGrades)

import autograder
from autograder.nbgrader_glue.hide_test_tracebacks import HideTestTracebacks
from autograder.nbgrader_glue.locked_cells import RestoreLockedCells

c = get_config()  # noqa: F821 (provided by nbgrader when it loads this file)

COURSE_ROOT = os.path.dirname(os.path.abspath(__file__))

c.CourseDirectory.course_id = "autograd-hooks"
c.CourseDirectory.root = COURSE_ROOT
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "notebooks"
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(COURSE_ROOT, "gradebook.db")
# Lesson folders hold only the notebook; nothing else is copied to students.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback"]

# What a student sees in place of a solution.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# Limits while autograding: seconds per cell, and how much output a cell may keep.
c.Execute.timeout = 60
c.Execute.interrupt_on_timeout = True
c.LimitOutput.max_lines = 1000
c.LimitOutput.max_traceback = 100

# torch prints UserWarning/FutureWarning text on stderr (for example when a non-leaf
# tensor's .grad is read). nbgrader gives zero points to a test cell that writes to stderr,
# so those warnings are dropped before grading; any other stderr output still counts.
c.IgnorePattern.enabled = True
c.IgnorePattern.pattern = r"(UserWarning|FutureWarning|DeprecationWarning)"

# Before running a submission, nbgrader restores its read-only cells (the test cells, hidden
# tests included) from the gradebook. nbgrader's own OverwriteCells compares them with the
# checksum taken before the hidden tests were cut out, so it reported every untouched test
# cell as changed; RestoreLockedCells also accepts the cell as it was released. nbgrader's
# default list, with that one step replaced.
c.Autograde.sanitize_preprocessors = [
    ClearOutput, DeduplicateIds, OverwriteKernelspec, RestoreLockedCells, CheckCellMetadata,
]
# The autograde pass after it: nbgrader's default list, written out so that both pipelines (this
# one and the feedback pass below) can be read here. The grading command (`python -m autograder
# grade`) runs the same lists with these changes (nbgrader_glue/inproc.py): DropFreeMetadata
# first in the sanitising pass, Execute replaced by the sandbox's ForkedExecute
# (trusted/executor.py), SaveAutoGrades by SaveAutoGradesOnce, and this pass's CheckCellMetadata
# left out when the sanitising pass made the same check; in the feedback pass, WithholdHiddenChecks
# last when hidden checks are withheld (before a deadline).
c.Autograde.autograde_preprocessors = [
    Execute, IgnorePattern, ClearMetadataPreprocessor, LimitOutput, SaveAutoGrades,
    AssignLatePenalties, CheckCellMetadata,
]

# Feedback shows the student's notebook with scores, without the hidden tests' source: the
# hidden regions are cut from test cells, and a failing test's traceback (which would quote
# the failing line) is cut to its last line, the error message.
c.ClearHiddenTests.enforce_metadata = False
c.GenerateFeedback.preprocessors = [GetGrades, HideTestTracebacks, ClearHiddenTests]
# The page itself (autograder/feedback/render.py): nothing a student wrote runs when it is opened
# (HTML cleaned, a script policy), maths rendered offline by the environment's MathJax, code
# in colour. `nbgrader generate_feedback` and `python -m autograder grade` both use it.
c.GenerateFeedback.exporter_class = "autograder.feedback.render.FeedbackHTMLExporter"
# The formgrader shows submissions through nbconvert's HTMLExporter: the same cleaning there
# (markdown cells and outputs' HTML through the allow-list, no JavaScript outputs, code
# coloured by the course's lexer, never one the notebook's metadata names).
c.HTMLExporter.sanitize_html = True
c.HTMLExporter.preprocessors = ["autograder.feedback.cleaning.CleanNotebook"]
c.HTMLExporter.filters = {"clean_html": "autograder.feedback.cleaning.clean_html",
                          "markdown2html": "autograder.feedback.budget.markdown_to_clean_html",
                          "strip_files_prefix": "autograder.feedback.cleaning.strip_files_prefix",
                          "highlight_code": "autograder.feedback.budget.highlight_code"}

# The formgrader's submission pages load MathJax from the Jupyter server, not the internet:
# the repository's jupyter/formgrader/ replaces the template part that names it, ahead of
# nbgrader's own templates (which the feedback pages also use).
REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(autograder.__file__)))
c.HTMLExporter.extra_template_basedirs = [
    os.path.join(REPOSITORY, "jupyter", "formgrader"),
    os.path.join(os.path.dirname(nbgrader.__file__), "server_extensions", "formgrader", "templates"),
]

# nbgrader's exchange (release, fetch, submit, collect) is for a class: docs/CLASS.md names a
# shared folder below this line, and the hub sets its own. Grading on one machine needs none,
# but the formgrader checks for one, and without it logs "Unwritable directory" and warns on
# its assignments page: here it finds this git-ignored folder, which `make formgrader` creates.
c.Exchange.root = os.path.join(COURSE_ROOT, "nbgrader_exchange")
c.Exchange.assignment_dir = COURSE_ROOT
# Collect copies only regular files a student owns, never through a link, bounded, takes the
# submission's time from the exchange's clock (not the folder's name), and skips (and names) a
# submission it refuses; Release Feedback goes on past a student it cannot serve
# (autograder/nbgrader_glue/exchange.py).
c.ExchangeFactory.collect = "autograder.nbgrader_glue.exchange.SafeCollect"
c.ExchangeFactory.release_feedback = "autograder.nbgrader_glue.exchange.SafeReleaseFeedback"
