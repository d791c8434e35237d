"""Jupyter server settings for `make lab` (JUPYTER_CONFIG_PATH=jupyter/student).

After JupyterLab saves a lesson, the start page is rewritten with the student's progress.
"""

c = get_config()  # noqa: F821 (provided by Jupyter when it loads this file)

c.ContentsManager.post_save_hook = "coursekit.lab.after_save"

# Students use nbgrader's Validate only; its instructor and exchange extensions stay off.
c.ServerApp.jpserver_extensions = {
    "nbgrader.server_extensions.formgrader": False,
    "nbgrader.server_extensions.assignment_list": False,
    "nbgrader.server_extensions.course_list": False,
}
