"""What a cluster's worker returns for a notebook, checked for what it can be before anything
is written: the submission's own digest and time, the lesson's own notebooks and cells, each
score within its cell's points, a manually graded cell left to the instructor unless its
answer was left blank, plain file names. A worker that returns anything else is dropped.
"""

from __future__ import annotations

import base64
import binascii
import warnings
from datetime import datetime, timezone
from pathlib import Path

from autograder.dispatch.cluster_bundle import remove_tree
from autograder.records import STATUSES
from autograder.tasks import GradingOptions, Result, Task

ITEM_KEYS = {"result", "digest", "autograded", "feedback", "page", "record"}


class Impossible(ValueError):
    """A worker returned a grade that cannot be."""


def _utc(value: datetime) -> datetime:
    return value.astimezone(timezone.utc).replace(tzinfo=None) if value.tzinfo else value


def submission_time(timestamp_text: str | None) -> datetime | None:
    """The time of a submission as nbgrader reads its timestamp.txt (naive UTC), or None."""
    from nbgrader.utils import parse_utc

    if not timestamp_text or not timestamp_text.strip():
        return None
    try:
        return _utc(parse_utc(timestamp_text.strip()))
    except Exception:  # noqa: BLE001 (nbgrader's own reading decides; no time to compare)
        return None


def _bytes(value: object, what: str) -> bytes:
    if not isinstance(value, str):
        raise Impossible(f"{what} is not base64 text")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as err:
        raise Impossible(f"{what} is not base64 ({err})") from err


def _files(value: object, what: str) -> list[tuple[str, bytes, int]]:
    if not isinstance(value, list):
        raise Impossible(f"its {what} files are not a list")
    out = []
    for entry in value:
        if not isinstance(entry, dict) or set(entry) != {"name", "mode", "data"}:
            raise Impossible(f"an entry of its {what} files is not {{name, mode, data}}")
        name, mode = entry["name"], entry["mode"]
        if not isinstance(name, str) or not name or "/" in name or "\0" in name or \
                name.startswith("."):
            raise Impossible(f"a {what} file name is not a plain name: {name!r}")
        if not isinstance(mode, int) or isinstance(mode, bool) or not 0 <= mode <= 0o777:
            raise Impossible(f"the mode of {what} file {name!r} is not a file mode")
        out.append((name, _bytes(entry["data"], f"{what} file {name!r}"), mode))
    return out


def _cells(config, lesson: str) -> dict[str, tuple[dict[str, float], set[str]]]:
    """Each notebook of the lesson in the command's gradebook: its grade cells' points, and
    the names of those that are answers graded by hand."""
    from autograder.nbgrader_glue.gradebook import gradebook

    with gradebook(config) as gb:
        return {nb.name: ({c.name: float(c.max_score) for c in nb.grade_cells},
                          {c.name for c in nb.solution_cells})
                for nb in gb.find_assignment(lesson).notebooks}


def check_item(config, task: Task, item: object, sent_digest: str,
               timestamp_text: str | None, duedate: str | None) -> dict:
    """`item` as a worker returned it for `task`, checked; Impossible says what cannot be."""
    if not isinstance(item, dict) or not set(item) <= ITEM_KEYS or "result" not in item:
        raise Impossible("it is not a graded notebook")
    result = Result.from_dict(item["result"])
    if result is None or (result.student_id, result.lesson) != (task.student, task.lesson):
        raise Impossible("its result is not this submission's")
    if result.status not in STATUSES or not all(isinstance(getattr(result, name), str) for name
                                                in ("reason", "log", "status")):
        raise Impossible(f"its status {result.status!r} is not one the grader gives")
    if item.get("digest") != sent_digest:
        raise Impossible("it graded another notebook than the one it was sent (its digest)")
    checked = {"result": result,
               "autograded": _files(item.get("autograded", []), "autograded"),
               "feedback": _files(item.get("feedback", []), "feedback"),
               "page": None if item.get("page") is None else _bytes(item["page"], "its page")}
    checked["record"] = _check_record(config, task.lesson, item.get("record"),
                                      submission_time(timestamp_text), duedate)
    return checked


def _number(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise Impossible(f"a score is not a number: {value!r}")
    return float(value)


def _check_record(config, lesson: str, record: object, when: datetime | None,
                  duedate: str | None) -> dict | None:
    if record is None:
        return None
    if not isinstance(record, dict) or set(record) != {"timestamp", "notebooks"} or \
            not isinstance(record["notebooks"], dict):
        raise Impossible("its gradebook rows are not {timestamp, notebooks}")
    stamp = record["timestamp"]
    if when is not None:
        try:
            theirs = _utc(datetime.fromisoformat(stamp)) if isinstance(stamp, str) else None
        except ValueError:
            theirs = None
        if theirs != when:
            raise Impossible(f"its submission time {stamp!r} is not the submission's "
                             f"({when.isoformat()})")
    cells = _cells(config, lesson)
    if set(record["notebooks"]) != set(cells):
        raise Impossible(f"its notebooks {sorted(record['notebooks'])} are not the lesson's")
    on_time = when is None or not duedate or when <= _utc(datetime.fromisoformat(duedate))
    for name, rows in record["notebooks"].items():
        points, by_hand = cells[name]
        if not isinstance(rows, dict) or set(rows) != {"late_penalty", "grades", "comments"} \
                or not isinstance(rows["grades"], dict) or not isinstance(rows["comments"], dict):
            raise Impossible(f"its rows of notebook {name} are not {{late_penalty, grades, "
                             "comments}")
        if set(rows["grades"]) != set(points) or not set(rows["comments"]) <= by_hand:
            raise Impossible(f"its cells of notebook {name} are not the lesson's")
        penalty = _number(rows["late_penalty"])
        if penalty is not None and not (0 <= penalty <= sum(points.values())
                                        and (penalty == 0 or not on_time)):
            raise Impossible(f"its late penalty {penalty} cannot be for this submission")
        for cell, pair in rows["grades"].items():
            if not isinstance(pair, list) or len(pair) != 2 or not isinstance(pair[1], bool):
                raise Impossible(f"its grade of cell {cell} is not [score, needs_manual]")
            score, manual = _number(pair[0]), pair[1]
            if score is not None and not 0 <= score <= points[cell]:
                raise Impossible(f"its score {score} for cell {cell} is outside 0..{points[cell]}")
            if not manual and (score is None or (cell in by_hand and score != 0)):
                raise Impossible(f"it clears the instructor's review of cell {cell}, which "
                                 "only an answer left blank (0 points) may skip")
        if not all(text is None or isinstance(text, str) for text in rows["comments"].values()):
            raise Impossible(f"a comment of notebook {name} is not text")
    return record


def write_item(config, options: GradingOptions, task: Task, checked: dict,
               timestamp_text: str | None) -> Result:
    """Record one notebook a worker graded, once checked: its gradebook rows, then its files."""
    from autograder.trusted.autograde import scores
    from autograder.nbgrader_glue.inproc import coursedir

    result: Result = checked["result"]
    student, lesson = task.student, task.lesson
    _import_record(config, student, lesson, checked["record"], submission_time(timestamp_text))
    result.score, result.max_score = scores(config, student, lesson)
    course = coursedir(config)
    for step in ("autograded", "feedback"):
        folder = Path(course.format_path(getattr(course, f"{step}_directory"), student, lesson))
        if folder.exists():
            remove_tree(folder)
        folder.mkdir(parents=True)
        for name, data, mode in checked[step]:
            (folder / name).write_bytes(data)
            (folder / name).chmod(mode)
    if checked["page"] is not None:
        page = Path(options.out) / "feedback" / student / f"{lesson}.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_bytes(checked["page"])
    return result


def _import_record(config, student: str, lesson: str, record: dict | None,
                   when: datetime | None) -> None:
    """Write a worker's checked gradebook rows into the course's gradebook; the time is the
    submission's own, read here."""
    from autograder.nbgrader_glue.gradebook import gradebook

    if record is None:
        return
    with gradebook(config) as gb, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SQLAlchemy's notes on nbgrader's new rows
        kwargs = {"timestamp": when} if when is not None else {}
        submission = gb.update_or_create_submission(lesson, student, **kwargs)
        for notebook in submission.notebooks:
            rows = record["notebooks"][notebook.name]
            penalty = rows["late_penalty"]
            notebook.late_submission_penalty = None if penalty is None else float(penalty)
            for grade in notebook.grades:
                score, manual = rows["grades"][grade.name]
                grade.auto_score = None if score is None else float(score)
                grade.needs_manual_grade = bool(manual)
            for comment in notebook.comments:
                text = rows["comments"].get(comment.name)
                comment.auto_comment = None if text is None else str(text)
        gb.db.commit()
