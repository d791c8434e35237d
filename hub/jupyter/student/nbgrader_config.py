"""nbgrader in a student's server on the class hub: the course's own settings (so that Validate
runs a notebook as grading will), the class's exchange, and the student's home folder."""

import os

c = get_config()  # noqa: F821 (provided by nbgrader when it loads this file)

HOME = os.path.expanduser("~")
REPOSITORY_CONFIG = os.path.join(os.environ["COURSE_REPOSITORY"], "nbgrader_config.py")
if not os.path.isfile(REPOSITORY_CONFIG):
    raise FileNotFoundError(f"the course's nbgrader_config.py is missing: {REPOSITORY_CONFIG}")
load_subconfig(REPOSITORY_CONFIG)  # noqa: F821

c.CourseDirectory.course_id = os.environ["COURSE_ID"]
c.CourseDirectory.root = HOME
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(HOME, ".nbgrader", "gradebook.db")
c.Exchange.root = os.environ["COURSE_EXCHANGE"]
# Fetched lessons go to the home folder; feedback goes beside them.
c.Exchange.assignment_dir = HOME
