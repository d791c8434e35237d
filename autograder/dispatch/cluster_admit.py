"""Which of a cluster's workers the command lets grade: the connection (TLS with mutual
certificates, or tcp:// only with --insecure-cluster), each worker's proof that it holds the
course secret, the course's bundle sent to those that did, and a watch on the workers while
the class is graded (who left, who joined, who was dropped)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from autograder.dispatch.cluster_bundle import code_digests, course_bundle
from autograder.dispatch.cluster_guard import BadReply, read_reply, refuse_pickles
from autograder.dispatch.cluster_proof import proof_key, proven
from autograder.dispatch.cluster_worker import (SHARED_OPTIONS, ClusterError, check_and_warm,
                                                worker_hello, worker_install)
from autograder.tasks import GradingOptions
from autograder.text import one_line

CONNECT_SECONDS = 10
WARM_SECONDS = 900  # a worker's check and warm-up (imports, the runner host, nbgrader)
INSECURE_HELP = ("A peer that reaches a tcp:// scheduler can attach a worker of its own: use "
                 "tls:// with the cluster's CA and this client's certificate and key "
                 "(--cluster-tls CA CERT KEY, docs/SCALE.md), or --insecure-cluster for a "
                 "cluster no one else can reach")


def security(options: GradingOptions):
    """Dask's Security for `options.cluster`: mutual TLS, required; None for tcp:// with
    --insecure-cluster; a ClusterError otherwise."""
    from distributed.security import Security

    address = options.cluster
    scheme = address.split("://", 1)[0] if "://" in address else "tcp"
    if scheme == "tls":
        files = tuple(options.cluster_tls) or _dask_tls_files()
        if len(files) != 3:
            raise ClusterError(f"the scheduler at {address} speaks TLS: give --cluster-tls "
                               "CA CERT KEY (the cluster's CA, and this client's certificate "
                               "and key) or set them in Dask's configuration "
                               "(distributed.comm.tls.ca-file, .client.cert, .client.key); "
                               "nothing was written.")
        for path in files:
            if not Path(path).is_file():
                raise ClusterError(f"--cluster-tls: {path} is not a file; nothing was written.")
        ca, cert, key = files
        return Security(tls_ca_file=ca, tls_client_cert=cert, tls_client_key=key,
                        require_encryption=True)
    if scheme == "tcp" and options.insecure_cluster:
        return None
    if scheme == "tcp":
        raise ClusterError(f"the scheduler's address {address} is not encrypted and lets "
                           f"anyone attach a worker; nothing was written. {INSECURE_HELP}.")
    raise ClusterError(f"the scheduler's address {address} is not tls://HOST:PORT; nothing "
                       "was written.")


def _dask_tls_files() -> tuple[str, ...]:
    """The CA, client certificate and key in Dask's configuration (its files or DASK_* vars)."""
    import dask

    files = tuple(dask.config.get(f"distributed.comm.tls.{name}", None)
                  for name in ("ca-file", "client.cert", "client.key"))
    return files if all(files) else ()


def connect_client(options: GradingOptions):
    """A Dask client of the scheduler that loads only msgpack from it; and the function that
    undoes the command's refusal of pickles when the client is closed."""
    from distributed import Client

    address, secure = options.cluster, security(options)
    restore = refuse_pickles()
    try:
        client = Client(address, timeout=CONNECT_SECONDS, security=secure,
                        deserializers=["msgpack"])
    except (OSError, TimeoutError, ValueError) as err:
        restore()
        raise ClusterError(f"the Dask scheduler at {address} cannot be reached ({err}); "
                           "nothing was written. Check the address (tls://HOST:8786), the "
                           "certificates, and that the scheduler is running and reachable "
                           "from here.") from err
    for topic in ("print", "warn"):  # a worker's events: nothing the command reads
        client.unsubscribe_topic(topic)
    return client, restore


class Admission:
    """The workers proven to hold this course, and what they are sent."""

    def __init__(self, client, restore, options: GradingOptions, preload: list[str]) -> None:
        from autograder.trusted.seeds import course_secret

        self.client, self.restore, self.address = client, restore, options.cluster
        root = Path(options.course_root)
        self.key = proof_key(course_secret(root))
        self.bundle, self.files = course_bundle(root)
        self.spec = {"bundle": self.bundle, "code": code_digests(), "preload": list(preload),
                     "options": {name: getattr(options, name) for name in SHARED_OPTIONS}}
        self.spec["key"] = hashlib.sha256(
            json.dumps(self.spec, sort_keys=True).encode()).hexdigest()[:16]
        self.proven: set[str] = set()
        self.seen: set[str] = set()  # asked once; a worker that refused is not asked again
        self.ids: dict[str, object] = {}  # the id each address joined with
        self.dropped: set[str] = set()

    def _workers(self) -> set[str]:
        """The scheduler's workers now. A worker is known by its address and the id it joined
        with: one that joins at the address of a worker that left (a restart on a fixed port,
        or a peer that claims it) is another worker, asked to prove itself again."""
        workers = self.client.scheduler_info(n_workers=-1).get("workers", {})
        for address, info in workers.items():
            ident = info.get("id") if isinstance(info, dict) else None
            if self.ids.setdefault(address, ident) != ident:
                self.ids[address] = ident
                self.proven.discard(address)
                self.seen.discard(address)
        return set(workers)

    def admit(self, addresses: set[str]) -> dict[str, str]:
        """Ask `addresses` to prove they hold the course; send the bundle to those that did and
        lack it. The proven join `self.proven`; the others' reasons are returned."""
        addresses = set(addresses) - self.dropped
        self.seen |= addresses
        if not addresses:
            return {}
        nonce = os.urandom(16).hex()
        replies = self._run(worker_hello, addresses, nonce, self.bundle, self.spec["code"])
        refused, send = {}, []
        for address in sorted(addresses):
            reply = replies.get(address)
            if not isinstance(reply, dict) or not proven(self.key, nonce, address,
                                                         reply.get("proof")):
                refused[address] = "it did not prove that it holds this course's secret" + (
                    f" ({one_line(reply.get('problem'), 300)})" if isinstance(reply, dict)
                    and isinstance(reply.get("problem"), str) else "")
            elif reply.get("problem"):
                refused[address] = one_line(reply["problem"], 500)
            else:
                self.proven.add(address)
                if reply.get("has_bundle") is not True:
                    send.append(address)
        if send:
            answers = self._run(worker_install, set(send), self.bundle, self.files)
            for address in send:
                if answers.get(address) is not None:
                    self.proven.discard(address)
                    refused[address] = one_line(answers.get(address), 500)
        return refused

    def _run(self, function, addresses: set[str], *args) -> dict:
        """`function(*args)` on each of `addresses`, by Client.run: what each returned, or a
        refusal's text where its answer cannot be read (one worker's answer that cannot be
        read would fail everyone's, so then each is asked alone)."""
        try:
            return self.client.run(function, *args, workers=sorted(addresses),
                                   on_error="return")
        except Exception:  # noqa: BLE001 (a worker's answer; asked one by one below)
            pass
        out = {}
        for address in sorted(addresses):
            try:
                out.update(self.client.run(function, *args, workers=[address],
                                           on_error="return"))
            except Exception as err:  # noqa: BLE001
                out[address] = f"its answer cannot be read ({type(err).__name__})"
        return out

    def admit_all(self, echo) -> None:
        """At the start: admit the scheduler's workers and warm them; a ClusterError when none
        may grade."""
        from distributed import wait

        workers = self._workers()
        if not workers:
            raise ClusterError(f"the Dask scheduler at {self.address} has no workers; nothing "
                               "was written. Start some (docs/SCALE.md) and grade again.")
        if echo:
            echo(f"Checking and warming {len(workers)} workers of the cluster at "
                 f"{self.address} ...")
        refused = self.admit(workers)
        warming = {address: self.client.submit(check_and_warm, self.spec, workers=[address],
                                               allow_other_workers=False,
                                               key=f"warm-{self.spec['key']}-{address}")
                   for address in sorted(self.proven)}
        try:
            wait(list(warming.values()), timeout=WARM_SECONDS)
        except TimeoutError:
            pass  # those not done are refused below
        warm = 0
        for address, future in warming.items():
            why, was_warm = _answer(future)
            if why:
                self.proven.discard(address)
                refused[address] = why
            warm += was_warm
        lines = [f"Worker {one_line(a, 200)} refused: {why}." for a, why in sorted(refused.items())]
        if not self.proven:
            raise ClusterError(f"no worker of the cluster at {self.address} can grade this "
                               "course; nothing was written.\n  " + "\n  ".join(lines))
        if echo:
            for line in lines:
                echo(line)
            echo(f"{len(self.proven)} workers of the cluster will grade" +
                 (f" ({warm} of them warm from an earlier grading: its course, imports and "
                  "runner host kept)." if warm else "."))

    def watch(self, echo) -> bool:
        """Between replies: say which proven workers left (killed, or restarted by a nanny,
        which gives them a new address), and admit the workers that joined; whether the
        proven set changed."""
        before = set(self.proven)
        now = self._workers()  # forgets an address another worker now holds
        for address in sorted(before - (self.proven & now)):
            self.proven.discard(address)
            if echo:
                echo(f"Worker {one_line(address, 200)} left the cluster while grading "
                     "(killed, or restarted by its nanny): what it returned is kept, the "
                     "notebooks it held are graded again.")
        refused = self.admit(now - self.seen)
        for address, why in sorted(refused.items()):
            if echo:
                echo(f"Worker {one_line(address, 200)} refused: {why}.")
        return self.proven != before

    def drop(self, address: str) -> None:
        self.proven.discard(address)
        self.dropped.add(address)

    def forget(self, address: str) -> None:
        self.proven.discard(address)

    def close(self) -> None:
        try:
            if self.client.status != "closed":
                self.client.close()
        finally:
            self.restore()


def _answer(future) -> tuple[str | None, bool]:
    """A worker's answer to its check and warm-up, read once: why it refuses (None: it
    accepts), and whether it was warm for this course already."""
    if future.status != "finished":
        return "it did not finish its check and warm-up", False
    try:
        reply = read_reply(future.result(), max_bytes=65536)
    except BadReply as err:
        return f"its answer cannot be read ({err})", False
    if not isinstance(reply, dict) or set(reply) - {"warm"} != {"refused"}:
        return "its answer is not {refused, warm}", False
    if reply["refused"] is not None:
        return one_line(reply["refused"], 500), False
    return None, reply.get("warm") is True
