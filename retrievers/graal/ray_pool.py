"""A pool of Ray actors of one kind behind the pool interface the index builds use (``parse``,
``build``, ``tokenise``, ``encode`` return a result whose ``get()`` waits; ``in_flight`` bounds the
tasks submitted ahead; ``actors``), on ``ray.util.ActorPool``.

Failures, in the order Ray and the pool meet them:

* an actor process dies (killed, out of memory, its node lost while other nodes have room): Ray
  restarts it (``max_restarts``) and runs its unfinished tasks again (``max_task_retries``);
* an actor cannot come back (its restarts used up, or its node lost and the cluster has no room
  left for it, which Ray would wait on for ever): the pool drops it and sends its unfinished tasks
  to the other actors, each task at most ``retries`` times;
* an actor that cannot start (its ``__init__`` raises, e.g. it cannot see the cache directory), a
  task that raises, no actor left: one line, as a ``ValueError``.

A task may therefore run more than once, so tasks must be idempotent: the graph's partition tasks
write their file under a name of their own and rename it (``builder.PartitionWorker.build``).
"""

from __future__ import annotations

import importlib
import logging
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

SLOTS = 2  # tasks queued on an actor at once: the next one is there when the current one ends


@dataclass(frozen=True)
class Resources:
    """What one actor asks Ray for."""

    cpus: float = 1.0
    gpus: float = 0.0


def check_shared(marker: str, token: str) -> None:
    """Raise one line unless ``marker`` (a file the driver wrote into the cache directory) is
    visible here with ``token`` in it: the cache directory is not shared with this node."""
    try:
        seen = Path(marker).read_text(encoding="utf-8")
    except OSError:
        seen = None
    if seen != token:
        import ray

        node = ray.util.get_node_ip_address()
        raise ValueError(
            f"ray worker on node {node} cannot see {marker}, which the driver wrote: on a cluster of "
            f"several machines the cache directory ({Path(marker).parent.parent}) must be shared "
            "storage mounted at the same path on every node"
        )


class PoolActor:
    """What runs in each Ray actor: the worker class ``target`` (or its name, ``module:Class``,
    imported there) built from ``args``, after checking that the driver's ``shared`` marker is
    visible."""

    def __init__(self, target: str | type, args: tuple, shared: tuple[str, str] | None = None) -> None:
        if shared is not None:
            check_shared(*shared)
        if isinstance(target, str):
            module, name = target.split(":")
            target = getattr(importlib.import_module(module), name)
        self.worker = target(*args)

    def call(self, tag: int, method: str, args: tuple) -> tuple[int, str, Any]:
        import ray

        value = getattr(self.worker, method)(*args)
        return tag, ray.get_runtime_context().get_node_id(), value


class _Result:
    def __init__(self, pool: RayPool, tag: int) -> None:
        self.pool, self.tag = pool, tag

    def get(self) -> Any:
        return self.pool.result(self.tag)


def _one_line(text: str) -> str:
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[-1] if lines else "(no message)"


class RayPool:
    """``workers`` actors running ``target(*args)``, each given ``SLOTS`` places in an
    ``ActorPool`` (tasks go to whichever actor has a free place; results are taken in any order
    and handed out by task).

    Args:
        name: what the workers do, for messages ("graph partition", "BM25 shard", ...).
        target: the worker class, or its name ``module:Class``.
        args: its constructor's arguments.
        workers: actors.
        resources: what each asks for.
        shared: ``(marker, token)`` the actors check before they start (``check_shared``).
        retries: Ray's restarts per actor and retries per task, and the pool's resends per task.
        poll_s: how often a wait looks for actors that cannot come back.
    """

    def __init__(
        self,
        name: str,
        target: str | type,
        args: tuple,
        workers: int,
        resources: Resources = Resources(),
        shared: tuple[str, str] | None = None,
        retries: int = 3,
        poll_s: float = 1.0,
    ) -> None:
        import ray
        from ray.util import ActorPool

        self.name = name
        self.resources = resources
        self.retries = retries
        self.poll_s = poll_s
        remote = ray.remote(PoolActor).options(
            num_cpus=resources.cpus,
            num_gpus=resources.gpus,
            max_restarts=retries,
            max_task_retries=retries,
        )
        self.actors = [remote.remote(target, args, shared) for _ in range(workers)]
        self.pool = ActorPool([a for _ in range(SLOTS) for a in self.actors])
        self.in_flight = SLOTS * workers
        self.submitted = 0  # tasks, each counted once however often it ran
        self.resent = 0  # tasks sent again after their actor was lost
        self.lost: list[str] = []  # actors the pool dropped
        self.nodes: Counter[str] = Counter()  # tasks done per node id
        self._tasks: dict[int, tuple[str, tuple]] = {}  # tag -> (method, args) until taken
        self._where: dict[int, str] = {}  # tag -> the actor it was sent to, until it is done
        self._refs: dict[str, int] = {}  # a result's object id -> its tag
        self._losses: Counter[int] = Counter()  # times a task's actor was lost under it
        self._dead_places: Counter[int] = Counter()  # times a task went to an actor already lost
        self._done: dict[int, Any] = {}

    # -- the pool interface ------------------------------------------------------------------------

    def parse(self, payload: list) -> _Result:
        return self._call("parse", (list(payload),))

    def build(self, out: str, sentences: list, chunk_size: int) -> _Result:
        return self._call("build", (out, sentences, chunk_size))

    def tokenise(self, texts: list[str]) -> _Result:
        return self._call("tokenise", (texts,))

    def encode(self, texts: list[str]) -> _Result:
        return self._call("encode", (texts,))

    def __enter__(self) -> RayPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        import ray

        for a in self.actors:
            ray.kill(a, no_restart=True)

    # -- scheduling --------------------------------------------------------------------------------

    def _call(self, method: str, args: tuple) -> _Result:
        tag = self.submitted
        self.submitted += 1
        self._tasks[tag] = (method, args)
        self._send(tag)
        self._take(timeout=0)  # free the places of finished tasks, so idle actors get the queued ones
        return _Result(self, tag)

    def _send(self, tag: int) -> None:
        self.pool.submit(self._start, tag)

    def _start(self, actor: Any, tag: int) -> Any:
        method, args = self._tasks[tag]
        ref = actor.call.remote(tag, method, args)
        self._where[tag] = actor._actor_id.hex()
        self._refs[ref.hex()] = tag
        return ref

    def result(self, tag: int) -> Any:
        """The value of task ``tag`` (each is taken once)."""
        while tag not in self._done:
            self._take(timeout=self.poll_s)
        del self._tasks[tag]
        return self._done.pop(tag)

    def _take(self, timeout: float) -> None:
        """Take finished tasks' values (at least one unless ``timeout`` passes)."""
        from ray.exceptions import ActorDiedError, ObjectLostError, RayTaskError

        while True:
            if not self.pool.has_next():
                if len(self._done) < len(self._tasks):  # tasks queued and no actor left
                    raise ValueError(
                        f"ray: every {self.name} worker was lost ({len(self.lost)} of "
                        f"{len(self.actors)}), {len(self._tasks) - len(self._done)} tasks unfinished"
                    )
                return
            try:
                tag, node, value = self.pool.get_next_unordered(timeout=timeout)
            except TimeoutError:
                if timeout:
                    self._drop_stuck()
                return
            except ActorDiedError as e:
                if e.actor_init_failed:
                    raise ValueError(f"ray: a {self.name} worker could not start: {_one_line(e)}") from None
                self._resend([t for t, a in self._where.items() if a == e.actor_id], e.actor_id)
                continue
            except ObjectLostError as e:  # a finished task's value lost with its node
                self._resend([self._refs[e.object_ref_hex]] if e.object_ref_hex in self._refs else [], None)
                continue
            except RayTaskError as e:
                cause = e.cause
                if isinstance(cause, (ValueError, OSError)):
                    raise ValueError(f"ray: {self.name} task: {_one_line(cause)}") from None
                raise
            self._where.pop(tag, None)
            self.nodes[node] += 1
            if tag in self._tasks and tag not in self._done:  # a task sent twice ends twice
                self._done[tag] = value
            timeout = 0

    def _resend(self, tags: list[int], actor_id: str | None) -> None:
        """Send ``tags`` again: their actor ``actor_id`` is dead (or their value was lost).  An
        actor has ``SLOTS`` places in the pool, so a task sent again may land on a dead actor's
        other place; that failure does not count against the task."""
        new = actor_id is None or actor_id not in self.lost
        if actor_id is not None and new:
            self.lost.append(actor_id)
            logger.warning("ray: a %s worker was lost; its tasks go to the others", self.name)
        for tag in tags:
            self._where.pop(tag, None)
            if tag not in self._tasks or tag in self._done:
                continue
            if new:
                self._losses[tag] += 1
                if self._losses[tag] > self.retries:
                    raise ValueError(
                        f"ray: {self.name} task {tag} was lost with its worker {self._losses[tag]} times; "
                        "giving up"
                    )
            else:  # at most once per dead place, unless the ActorPool gives dead actors out again
                self._dead_places[tag] += 1
                if self._dead_places[tag] > SLOTS * len(self.actors):
                    raise ValueError(
                        f"ray: {self.name} task {tag} keeps going to lost workers (a Ray whose "
                        "ActorPool reuses dead actors: garag's scale extra needs ray>=2.60)"
                    )
            self.resent += 1
            self._send(tag)

    def _drop_stuck(self) -> None:
        """Kill the actors Ray is trying to bring back when the cluster has no room for all of them
        (a node was lost): their tasks then fail here and go to the actors that are running."""
        import ray
        from ray.core.generated.gcs_pb2 import ActorTableData

        have = ray.cluster_resources()
        alive = [a for a in self.actors if a._actor_id.hex() not in self.lost]
        over = max(
            self._excess(len(alive), self.resources.cpus, have.get("CPU", 0.0)),
            self._excess(len(alive), self.resources.gpus, have.get("GPU", 0.0)),
        )
        waiting = (ActorTableData.RESTARTING, ActorTableData.PENDING_CREATION)
        for actor in alive:
            if over <= 0:
                break
            if actor._get_local_state() in waiting:
                logger.warning("ray: the cluster has no room for a lost %s worker; dropping it", self.name)
                ray.kill(actor, no_restart=True)
                over -= 1

    @staticmethod
    def _excess(actors: int, each: float, have: float) -> int:
        """Actors asking ``each`` that do not fit in ``have``."""
        if each <= 0:
            return 0
        fit = int(have / each + 1e-9)
        return max(0, actors - fit)
