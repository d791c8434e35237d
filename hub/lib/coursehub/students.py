"""The class's students in the course's gradebook, from the hub's users.

The hub runs this at its start (for every user it knows) and when a student's server starts,
so that the formgrader lists the whole class, not only those who submitted. It runs as no one
in particular (the account `nobody`) with the instructors' group, the group that may write the
gradebook: the hub itself (root) never opens a file that instructors can change.

    python -m coursehub.students COURSE_ROOT COURSE_ID NAME...
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

GRADEBOOK = "gradebook.db"


def add_students(course_root: Path, course_id: str, names: list[str]) -> list[str]:
    """Add the students not yet in the gradebook (creating it if needed); returns those added."""
    # The course's opener stamps a new gradebook in this process (nbgrader would start a
    # second Python for `alembic heads`): the hub runs this at its start and at each student's.
    from autograder.nbgrader_glue.gradebook import gradebook as open_gradebook

    database = Path(course_root) / GRADEBOOK
    added = []
    with open_gradebook(db_url=f"sqlite:///{database}", course_id=course_id) as gradebook:
        known = {student.id for student in gradebook.students}
        for name in names:
            if name not in known:
                gradebook.update_or_create_student(name)
                added.append(name)
    info = database.stat()
    if info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) != 0o660:
        database.chmod(0o660)  # SQLite creates it 0644 less the umask; every instructor writes it
    return added


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    added = add_students(Path(argv[0]), argv[1], argv[2:])
    if added:
        print(f"Students added to the gradebook: {', '.join(added)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
