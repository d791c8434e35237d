"""nbgrader in an instructor's server on the class hub: the class's course folder (its
nbgrader_config.py holds the course's settings, the exchange and the gradebook)."""

import os

from nbgrader.converters import GenerateAssignment

from autograder.release import CourseRelease

c = get_config()  # noqa: F821 (provided by nbgrader when it loads this file)

COURSE_CONFIG = os.path.join(os.environ["COURSE_ROOT"], "nbgrader_config.py")
if not os.path.isfile(COURSE_CONFIG):
    raise FileNotFoundError(f"the class's course folder has no nbgrader_config.py: {COURSE_CONFIG}")
load_subconfig(COURSE_CONFIG)  # noqa: F821

# The course's own Collect and Release Feedback (autograder/nbgrader_glue/exchange.py),
# whatever the course folder's configuration says.
c.ExchangeFactory.collect = "autograder.nbgrader_glue.exchange.SafeCollect"
c.ExchangeFactory.release_feedback = "autograder.nbgrader_glue.exchange.SafeReleaseFeedback"
# The formgrader's Generate makes the lessons `make release` makes (navigation, points in the
# headings, Run All past an unanswered exercise): the course's release step comes last.
c.GenerateAssignment.preprocessors = [
    *GenerateAssignment.class_traits()["preprocessors"].default(), CourseRelease]
