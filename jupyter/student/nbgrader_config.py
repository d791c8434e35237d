"""nbgrader settings added for students (JUPYTER_CONFIG_PATH=jupyter/student, as `make lab`
sets it); the course's own settings are in the repository's nbgrader_config.py.

Validate's dialog lists the failing test cells; the summary of every exercise (passes, not
answered yet, fails and why, points) goes first.
"""

from coursekit.progress import validation_cell_started, validation_started

c = get_config()  # noqa: F821 (provided by nbgrader when it loads this file)

c.Execute.on_notebook_start = validation_started
c.Execute.on_cell_start = validation_cell_started
