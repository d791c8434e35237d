"""nbgrader in a student's server on the class hub: the course's own settings (so that Validate
runs a notebook as grading will), Validate's summary as `make lab` has it, the class's exchange,
and the student's home folder."""

import os

c = get_config()  # noqa: F821 (provided by nbgrader when it loads this file)

HOME = os.path.expanduser("~")
REPOSITORY = os.environ["COURSE_REPOSITORY"]
# The course's settings, then what students' nbgrader has with `make lab` (jupyter/student:
# Validate's summary).
for config in (os.path.join(REPOSITORY, "nbgrader_config.py"),
               os.path.join(REPOSITORY, "jupyter", "student", "nbgrader_config.py")):
    if not os.path.isfile(config):
        raise FileNotFoundError(f"the course's {os.path.relpath(config, REPOSITORY)} is "
                                f"missing or unreadable: {config}")
    load_subconfig(config)  # noqa: F821

c.CourseDirectory.course_id = os.environ["COURSE_ID"]
c.CourseDirectory.root = HOME
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(HOME, ".nbgrader", "gradebook.db")
c.Exchange.root = os.environ["COURSE_EXCHANGE"]
# Fetched lessons go to the home folder; feedback goes beside them.
c.Exchange.assignment_dir = HOME
