"""nbgrader's exchange with nothing of a student's trusted: Collect and Release Feedback.

nbgrader's own Collect copies a student's inbound folder with the instructor's rights and
follows its links, takes the submission's time from the folder's name (which the student
writes), and stops at the first folder it cannot read; its Release Feedback stops at the first
student it cannot serve. `SafeCollect` and `SafeReleaseFeedback` replace them (the course's
nbgrader_config.py names them in `c.ExchangeFactory`):

- Collect copies only regular files and folders, each opened without following a link
  (O_NOFOLLOW, relative to its folder's descriptor), from a folder the student owns, each file
  owned by the student; a link, a FIFO, a device or anything else is reported, never opened.
  It copies at most `max_entries` entries, `max_file_bytes` per file and `max_total_bytes` in
  all, reading no more than that.
- A submission it refuses (and why) is written in the log with the student's name; that student's
  newest acceptable submission is collected instead, if any, and every other student as usual.
- The submission's time is the newest change time (ctime) of its folder and of everything in it,
  which no student can set back, and never later than the collector's clock. It goes into
  `timestamp.txt` (nbgrader's late penalties read it); the time the folder's name claims goes
  into `timestamp_claimed.txt` beside it, and the log says when the two differ by more than a
  minute.

Who submitted a folder is known in one of two ways (`SafeCollect.inbound_layout`):

- "flat" (the class hub or a shared machine): inbound holds the folders; every student is a
  system account, and the folder's owner (and each file's) must be the student it is filed under;
- "per-student" (Kubernetes, docs/HUB.md): inbound holds one folder per student, which the hub
  mounts as that student's inbound and nowhere else; that folder's name is the student.
"""

from __future__ import annotations

import datetime
import fnmatch
import glob
import os
import re
import secrets
import shutil
import stat

from nbgrader.api import MissingEntry
from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.exchange.default.release_feedback import ExchangeReleaseFeedback
from nbgrader.utils import check_mode, notebook_hash, parse_utc
from traitlets import Enum, Integer

from autograder.intake.safe_copy import (OPEN_DIR, OPEN_FILE, Limits, Refused, account_name,
                                         kind_of, make_folders, open_folder, read_small, scan)
from autograder.nbgrader_glue.gradebook import gradebook
from autograder.text import one_line, printable

CLAIMED_FILE = "timestamp_claimed.txt"  # the time a submission's folder name gives
TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S.%f UTC"  # nbgrader's, always in UTC
DIFFERENCE_SHOWN = datetime.timedelta(minutes=1)
MAX_SECRET_BYTES = 4096  # nbgrader writes 128 characters
MAX_FEEDBACK_BYTES = 256 * 1024 * 1024
RESUBMIT = "ask the student to submit again from the Assignments tab"


def utc_text(moment: datetime.datetime) -> str:
    return moment.strftime(TIMESTAMP_FORMAT)


def nbgrader_time(text: str) -> datetime.datetime:
    """The time in `text` as nbgrader reads a timestamp.txt (its own parser); ValueError or
    OverflowError when it holds none."""
    return parse_utc(text)


class SafeCollect(ExchangeCollect):
    """nbgrader's ExchangeCollect (0.9.6), trusting nothing a student wrote (module docstring)."""

    inbound_layout = Enum(["flat", "per-student"], default_value="flat", config=True,
                          help="flat: the owner of a submission's folder is the student; "
                               "per-student: the name of the folder that holds it is")
    max_entries = Integer(100, config=True,
                          help="files and folders one submission may hold")
    max_file_bytes = Integer(100 * 1024 * 1024, config=True,
                             help="bytes of one file of a submission")
    max_total_bytes = Integer(200 * 1024 * 1024, config=True,
                              help="bytes of all the files of one submission")

    @property
    def limits(self) -> Limits:
        return Limits(self.max_entries, self.max_file_bytes, self.max_total_bytes)

    def init_src(self):
        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        self.course_path = os.path.join(self.root, self.coursedir.course_id)
        self.inbound_path = os.path.join(self.course_path, "inbound")
        if not os.path.isdir(self.inbound_path):
            self.fail(f"Course not found: {self.inbound_path}")
        if not check_mode(self.inbound_path, read=True, execute=True):
            self.fail(f"You don't have read permissions for the directory: {self.inbound_path}")
        self.collected_at = datetime.datetime.now(datetime.timezone.utc)
        self.refused: list[str] = []
        with gradebook(db_url=self.coursedir.db_url,
                       course_id=self.coursedir.course_id) as gb:
            try:
                self.duedate = gb.find_assignment(self.coursedir.assignment_id).duedate
            except MissingEntry:
                self.duedate = None
        by_student: dict[str, list[dict]] = {}
        for record in self._candidates():
            by_student.setdefault(record["username"], []).append(record)
        self.src_records = []
        for student in sorted(by_student):
            newest_first = self._sort_by_timestamp(by_student[student])
            if self.duedate is not None and self.before_duedate:
                on_time = [r for r in newest_first if r["timestamp"] <= self.duedate]
                newest_first = on_time or newest_first
            self.src_records.append(newest_first)

    def _refuse(self, student: str, folder: str, why: str) -> None:
        message = one_line(f"Not collected: {printable(student)}'s submission "
                           f"{printable(folder)}: {why}; {RESUBMIT} (nothing of it was copied)")
        self.refused.append(message)
        self.log.error(message)

    def _candidates(self) -> list[dict]:
        """Every submission of the lesson in inbound that passes the checks (one record each)."""
        student_id = self.coursedir.student_id or "*"
        pattern = f"{student_id}+{self.coursedir.assignment_id}+*"
        inbound = os.open(self.inbound_path, OPEN_DIR)
        try:
            if self.inbound_layout == "flat":
                places = [(inbound, "", None)]
            else:
                places = []
                for name in sorted(os.listdir(inbound)):
                    if fnmatch.fnmatchcase(name, student_id):
                        try:
                            places.append((open_folder(name, inbound), name, name))
                        except (Refused, OSError) as err:
                            self._refuse(name, name, str(err))
            records = []
            for fd, prefix, filed_by in places:
                try:
                    names = sorted(os.listdir(fd))
                except OSError as err:
                    self._refuse(filed_by or "?", prefix or self.inbound_path, str(err))
                    names = []
                for name in names:
                    if fnmatch.fnmatchcase(name, pattern):
                        record = self._candidate(fd, prefix, name, filed_by)
                        if record is not None:
                            records.append(record)
                if fd != inbound:
                    os.close(fd)
            return records
        finally:
            os.close(inbound)

    def _candidate(self, parent: int, prefix: str, name: str, filed_by: str | None) -> dict | None:
        parts = name.rsplit("+", 3)
        student = parts[0]
        shown = os.path.join(prefix, name)
        if filed_by is not None and filed_by != student:
            self._refuse(student, shown, f"it is filed under {student} in {filed_by}'s inbound")
            return None
        try:
            claimed = parse_utc(parts[2]) if len(parts) >= 3 else None
        except Exception:  # noqa: BLE001 (dateutil raises several kinds on a made-up time)
            claimed = None
        if claimed is None:
            self._refuse(student, shown, "the time in its name is not one nbgrader's submit writes")
            return None
        try:
            owner = None
            if self.inbound_layout == "flat":
                owner = os.stat(name, dir_fd=parent, follow_symlinks=False).st_uid
                if account_name(owner) != student:
                    raise Refused(f"it is filed under {student} but belongs to "
                                  f"{account_name(owner)}")
            fd = open_folder(name, parent)
            try:
                found = scan(fd, owner, self.limits, self.coursedir.ignore)
            finally:
                os.close(fd)
            if "submission_secret.txt" not in found.files:
                raise Refused("it has no submission_secret.txt, which nbgrader's submit writes "
                              "(without it the student's feedback cannot be returned)")
        except Exception as err:  # noqa: BLE001 (one submission never stops the others)
            self._refuse(student, shown, str(err) if isinstance(err, (Refused, OSError))
                         else f"{type(err).__name__}: {err}")
            return None
        trusted = min(datetime.datetime.fromtimestamp(found.ctime, datetime.timezone.utc),
                      self.collected_at)
        return {"username": student, "filename": shown, "owner": owner,
                "timestamp": parse_utc(utc_text(trusted)), "claimed": claimed}

    def copy_files(self):
        if not self.src_records:
            self.log.warning("No submissions of '%s' for course '%s' to collect",
                             self.coursedir.assignment_id, self.coursedir.course_id)
        else:
            self.log.info("Processing %d submissions of '%s' for course '%s'",
                          len(self.src_records), self.coursedir.assignment_id,
                          self.coursedir.course_id)
        for choices in self.src_records:
            for record in choices:
                try:
                    self._collect(record)
                    break
                except Exception as err:  # noqa: BLE001 (one submission never stops the others)
                    self._refuse(record["username"], record["filename"],
                                 str(err) if isinstance(err, (Refused, OSError))
                                 else f"{type(err).__name__}: {err}")
            else:
                self.log.error("Nothing collected for %s: no submission of theirs could be taken "
                               "(see above)", printable(choices[0]["username"]))
        if self.refused:
            self.log.error("%d submission(s) not collected, each named above; every other "
                           "student's newest submission was collected", len(self.refused))

    def _collect(self, record: dict) -> None:
        student, lesson = record["username"], self.coursedir.assignment_id
        dest = self.coursedir.format_path(self.coursedir.submitted_directory, student, lesson)
        if os.path.isdir(dest):
            try:
                existing = self.coursedir.get_existing_timestamp(dest)
            except Exception:  # noqa: BLE001 (nbgrader fails on an unreadable one: take the new)
                existing = None
            newer = existing is None or record["timestamp"] > existing
            if not (self.update and newer) and not (self.before_duedate
                                                    and existing != record["timestamp"]):
                self.log.info("%s: %s %s", "No newer submission to collect" if self.update else
                              "Submission already exists, use --update to update",
                              student, lesson)
                return
        self._copy(record, dest)

    def _copy(self, record: dict, dest: str) -> None:
        """Copy the submission into a new folder beside `dest`, then put it in `dest`'s place:
        a submission that fails half-way leaves the one collected earlier as it was."""
        student, lesson = record["username"], self.coursedir.assignment_id
        modes = (0o2770, 0o660) if self.coursedir.groupshared else (0o750, 0o640)
        parent = os.path.dirname(dest)
        make_folders(parent, modes[0])
        staging = os.path.join(parent, f".{lesson}.collecting-{secrets.token_hex(4)}")
        os.mkdir(staging)
        os.chmod(staging, modes[0])
        try:
            inbound = os.open(self.inbound_path, OPEN_DIR)
            try:
                fd = inbound
                for part in record["filename"].split(os.sep):
                    opened = open_folder(part, fd)
                    if fd != inbound:
                        os.close(fd)
                    fd = opened
                try:
                    found = scan(fd, record["owner"], self.limits, self.coursedir.ignore,
                                 into=staging, modes=modes)
                finally:
                    os.close(fd)
            finally:
                os.close(inbound)
            trusted = min(datetime.datetime.fromtimestamp(found.ctime, datetime.timezone.utc),
                          self.collected_at)
            for name, text in (("timestamp.txt", utc_text(trusted)),
                               (CLAIMED_FILE, utc_text(record["claimed"]))):
                path = os.path.join(staging, name)
                if os.path.lexists(path):
                    os.unlink(path)
                with open(path, "x") as handle:
                    handle.write(text)
                os.chmod(path, modes[1])
            if os.path.isdir(dest):
                self.log.info("Updating submission: %s %s", student, lesson)
                old = os.path.join(parent, f".{lesson}.replaced-{secrets.token_hex(4)}")
                os.rename(dest, old)
                os.rename(staging, dest)
                shutil.rmtree(old)
            else:
                self.log.info("Collecting submission: %s %s", student, lesson)
                os.rename(staging, dest)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        claimed = record["claimed"]
        trusted = trusted.replace(tzinfo=None)
        line = (f"{printable(student)} {lesson}: submitted at {utc_text(trusted)} by the "
                f"exchange's clock (the folder's name says {utc_text(claimed)})")
        if abs(trusted - claimed) > DIFFERENCE_SHOWN:
            self.log.warning("%s; lateness counts from %s", line, utc_text(trusted))
        else:
            self.log.info(line)


class SafeReleaseFeedback(ExchangeReleaseFeedback):
    """nbgrader's ExchangeReleaseFeedback (0.9.6) that serves every student it can: one whose
    feedback cannot be released is named in the log with what to do, and the rest go on."""

    def copy_files(self):
        exclude = set(filter(None, (self.coursedir.student_id_exclude or "").split(",")))
        pattern = re.escape(os.path.sep).join([
            self.coursedir.format_path(self.coursedir.feedback_directory, "(?P<student_id>.*)",
                                       self.coursedir.assignment_id, escape=True),
            "(?P<notebook_id>.*).html"])
        released, failed = 0, []
        for html_file in sorted(glob.glob(os.path.join(self.src_path, "*.html"))):
            match = re.match(pattern, html_file)
            if match is None:
                self.log.error("Could not match '%s' with regexp '%s'", html_file, pattern)
                continue
            student, notebook = match["student_id"], match["notebook_id"]
            if student in exclude:
                continue
            try:
                self._release(html_file, student, notebook)
                released += 1
            except Exception as err:  # noqa: BLE001 (one student never stops the others)
                message = one_line(
                    f"Feedback not released for {printable(student)} "
                    f"({self.coursedir.assignment_id}/{printable(notebook)}): {err}. "
                    "If they were graded from a folder or an LMS export, give them "
                    f"{printable(html_file)} another way; otherwise {RESUBMIT} and collect, "
                    "grade and release again")
                failed.append(message)
                self.log.error(message)
        if failed:
            self.log.error("Feedback released for %d notebook(s); not for %d, each named above",
                           released, len(failed))

    def _release(self, html_file: str, student: str, notebook: str) -> None:
        folder = os.path.dirname(html_file)
        secret_path = os.path.join(folder, "submission_secret.txt")
        if not os.path.lexists(secret_path):
            raise Refused("its submission has no submission_secret.txt (it did not come "
                          "through the exchange), so the student's copy cannot find it")
        secret = read_small(secret_path, MAX_SECRET_BYTES)
        try:
            timestamp = read_small(os.path.join(folder, "timestamp.txt"), 1024).strip()
        except (Refused, OSError):
            timestamp = "no timestamp.txt"
        checksum = notebook_hash(secret=secret, notebook_id=notebook)
        temporary = os.path.join(self.dest_path, f"{checksum}-tmp.html")
        self.log.info("Releasing feedback for student '%s' on assignment '%s/%s/%s' (%s)",
                      printable(student), self.coursedir.course_id,
                      self.coursedir.assignment_id, printable(notebook), one_line(timestamp, 80))
        source = os.open(html_file, OPEN_FILE)
        try:
            info = os.fstat(source)
            if not stat.S_ISREG(info.st_mode):
                raise Refused(f"{html_file} is {kind_of(info.st_mode)}")
            if info.st_size > MAX_FEEDBACK_BYTES:
                raise Refused(f"{html_file} is larger than {MAX_FEEDBACK_BYTES} bytes")
            if os.path.lexists(temporary):
                os.unlink(temporary)
            out = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            try:
                written = 0
                while chunk := os.read(source, 1 << 20):
                    written += len(chunk)
                    if written > MAX_FEEDBACK_BYTES:
                        raise Refused(f"{html_file} grew past {MAX_FEEDBACK_BYTES} bytes")
                    os.write(out, chunk)
            finally:
                os.close(out)
        except BaseException:
            if os.path.lexists(temporary):
                os.unlink(temporary)
            raise
        finally:
            os.close(source)
        os.chmod(temporary, 0o644)
        final = os.path.join(self.dest_path, f"{checksum}.html")
        os.replace(temporary, final)
        self.log.info("Feedback released to: %s", final)
