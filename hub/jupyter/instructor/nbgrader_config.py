"""nbgrader in an instructor's server on the class hub: the class's course folder (its
nbgrader_config.py holds the course's settings, the exchange and the gradebook)."""

import os

c = get_config()  # noqa: F821 (provided by nbgrader when it loads this file)

COURSE_CONFIG = os.path.join(os.environ["COURSE_ROOT"], "nbgrader_config.py")
if not os.path.isfile(COURSE_CONFIG):
    raise FileNotFoundError(f"the class's course folder has no nbgrader_config.py: {COURSE_CONFIG}")
load_subconfig(COURSE_CONFIG)  # noqa: F821

# Collect leaves out a submission filed under another student's name (hub/lib/coursehub/exchange.py).
c.ExchangeFactory.collect = "coursehub.exchange.OwnerCheckedCollect"
