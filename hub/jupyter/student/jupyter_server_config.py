"""Jupyter server settings for a student's server on the class hub: nbgrader's Assignments tab
and Validate without its instructor extensions, and the course's start page (START-HERE.md in
the home folder, where the server opens), written afresh each time it is opened and reloaded in
JupyterLab after a lesson is saved, as `make lab` does."""

import os

c = get_config()  # noqa: F821 (provided by Jupyter when it loads this file)

c.ServerApp.jpserver_extensions = {
    "nbgrader.server_extensions.formgrader": False,
    "nbgrader.server_extensions.course_list": False,
    "coursehub.startpage": True,  # the submissions' state, for the Assignments tab
}
c.ServerApp.contents_manager_class = "coursehub.startpage.StartPageContents"
c.LabApp.extra_labextensions_path = [
    os.path.join(os.environ["COURSE_REPOSITORY"], "jupyter", "student", "labextensions")]
