"""The vector tier: per session, the newest Annoy generation plus an exact
tail, in step with history.json.

Owns `.store/vectors/`. It learns of messages through the DerivedStore calls
(and of client-supplied embeddings through `check` and `supplied`), embeds
them on its own worker thread, appends them to the tail, and has a child
process build a new generation when the tail grows, compaction leaves dead
items, or an Annoy file failed its check; the new generation is verified and
swapped in atomically. All of it is derived from history.json: rebuilt from it
when missing, damaged, out of step, or made by another embedder or dimension
(client-supplied vectors survive everything but such a change, after which
the server embeds those messages too). Messages whose embedding failed stay
pending and are retried with backoff; a search embeds the pending messages it
needs or counts them as unsearched, never skips them silently. Must never
block a DerivedStore call on embedding, building or file I/O.
"""

from __future__ import annotations

import collections
import itertools
import logging
import subprocess
import threading
import time
from pathlib import Path

import msgspec
import numpy as np
from threadpoolctl import threadpool_limits

from memsvc.core import durable, layout
from memsvc.core.errors import InvalidArgument, MemsvcError
from memsvc.core.reasons import Reason
from memsvc.core.records import Record
from memsvc.runtime import tracing
from memsvc.vectors import build
from memsvc.vectors.embedders.base import Embedder, unit_length
from memsvc.vectors.generation import Eligible, best, exact
from memsvc.vectors.loading import load, record_rows
from memsvc.vectors.state import SessionVectors

log = logging.getLogger(__name__)

EMBED_BATCH = 128
EMBED_GATHER_SECONDS = 0.02
DRAIN_SECONDS = 5.0
"How long a shutdown waits for the embed worker to store what is queued."
QUERY_EMBED_LIMIT = 256
"Pending messages a search embeds itself; past this it reports them as unsearched."


class Tuning(msgspec.Struct, frozen=True):
    rebuild_rows: int = 1024
    "Tail rows that start a background build (or 5% of the generation, if more)."
    trees: int = 100
    search_k: int = 15_000


class Nearest(msgspec.Struct):
    ids: list[int]
    scores: list[float]
    unsearched: int
    "Qualifying messages not searched: their embedding is still pending or failing."


class VectorStore:
    """Implements window.derived.DerivedStore and EmbeddingSink.

    A session's state is made by `recover` when the window opens the session
    (with its records, which loading checks the files against) and dropped at
    `closed` once idle, so the vectors held in memory follow the open sessions.
    """

    def __init__(self, root: Path, embedder: Embedder, tuning: Tuning | None = None):
        self.root = root
        self.embedder = embedder
        self.tuning = tuning or Tuning()
        self._states: collections.OrderedDict[str, SessionVectors] = collections.OrderedDict()
        self._registry = threading.Lock()
        self._ready: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._builds: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._wake = threading.Condition()
        self._stopping = False
        self._embedded_batches = 0
        self._traces = tracing.Gathered("vectors.embed")
        durable.ensure_dir(root)
        durable.sweep_deleted(root)
        self._directory = durable.DataPaths([root])
        self._directory_gone_said = False
        # The products here are small: one BLAS thread answers in a fraction of
        # a millisecond, while BLAS threads fighting the server's for two cores
        # were measured at 10-90 ms p90.
        threadpool_limits(1, user_api="blas")
        self._threads = [threading.Thread(target=self._embed_loop, name="vectors-embed", daemon=True),
                         threading.Thread(target=self._build_loop, name="vectors-build", daemon=True)]
        for thread in self._threads:
            thread.start()

    def _state(self, session_id: str) -> SessionVectors:
        with self._registry:
            state = self._states.get(session_id)
            if state is not None:
                self._states.move_to_end(session_id)
                return state
            state = self._states[session_id] = SessionVectors(session_id, self.root / layout.directory_name(session_id))
            return state

    def _notify(self, session_id: str, queue: collections.OrderedDict[str, None]) -> None:
        with self._wake:
            queue[session_id] = None
            self._wake.notify_all()

    # -- DerivedStore --------------------------------------------------------

    def recover(self, session_id: str, records: list[Record]) -> None:
        state = self._state(session_id)
        with state.lock:
            if state.loaded:
                state.queue(records)
            else:
                state.recovered = records
        self._notify(session_id, self._ready)

    def appended(self, session_id: str, records: list[Record]) -> None:
        state = self._state(session_id)
        with state.lock:
            state.queue(records)
        self._traces.note(session_id)
        self._notify(session_id, self._ready)

    def compacted(self, session_id: str, first_kept_id: int, start_at: int) -> None:
        state = self._state(session_id)
        with state.lock:
            state.raise_floor(first_kept_id)
            dead = state.loaded and state.dead_rows() > 0
        if dead:
            self._notify(session_id, self._builds)

    def cleared(self, session_id: str) -> int:
        state = self._state(session_id)
        return state.clear()

    def deleted(self, session_id: str, ids: list[int]) -> int:
        """Searches skip these messages at once; a build, started now, leaves their vectors out (a restart
        before it finds them missing from history.json and skips them too)."""
        state = self._state(session_id)
        self._ensure_loaded(state)  # to count what it held, when the session was recovered but not loaded
        dropped = state.delete(ids)
        if state.needs_build(self.tuning.rebuild_rows):
            self._notify(session_id, self._builds)
        return dropped

    def closed(self, session_id: str) -> None:
        """Drop the session's state if nothing is in flight; a busy one stays until the session is next opened."""
        with self._registry:
            state = self._states.get(session_id)
            if state is not None and state.idle():
                # Searches still holding its generation keep it mapped until they finish.
                del self._states[session_id]

    # -- client-supplied embeddings ------------------------------------------

    def check(self, session_id: str, embeddings: list[list[float]]) -> None:
        """Refuse, before anything is stored, embeddings this index cannot hold."""
        for index, embedding in enumerate(embeddings):
            if embedding:
                self.query_vector(embedding, f"messages[{index}].embedding")

    def supplied(self, session_id: str, records: list[Record], embeddings: list[list[float]]) -> None:
        state = self._state(session_id)
        with state.lock:
            for record, embedding in zip(records, embeddings, strict=True):
                if embedding:
                    state.prepared[record.id] = unit_length(np.asarray([embedding]))[0]

    def query_vector(self, values: list[float], field: str = "query_embedding") -> np.ndarray:
        vector = np.asarray(values, dtype=np.float32)
        if len(vector) != self.embedder.dimension:
            raise InvalidArgument(
                f"{field} has {len(vector)} dimensions; this server's index holds {self.embedder.dimension} "
                f"({self.embedder.name})", reason=Reason.VECTOR_DIMENSION_MISMATCH,
                metadata={"expected": str(self.embedder.dimension), "got": str(len(vector))})
        if not np.isfinite(vector).all() or not vector.any():
            raise InvalidArgument(f"{field} must be finite and not all zero", reason=Reason.INVALID_EMBEDDING)
        unit: np.ndarray = unit_length(vector[None, :])[0]
        return unit

    # -- search --------------------------------------------------------------

    def ready_rows(self, session_id: str) -> int | None:
        """How many vectors the session's index holds when it is in memory with nothing pending (a search
        then does no I/O and embeds nothing); None otherwise."""
        with self._registry:
            state = self._states.get(session_id)
        if state is None:
            return None
        with state.lock:
            if not state.loaded or state.pending:
                return None
            return state.tail.length + (state.generation.info.items if state.generation is not None else 0)

    def nearest(self, session_id: str, records: list[Record], query: np.ndarray, limit: int,
                eligible: Eligible) -> Nearest:
        """The `limit` most similar qualifying messages, best first."""
        state = self._state(session_id)
        self._ensure_loaded(state, records)
        with state.lock:
            eligible = Eligible(max(eligible.first_id, state.first_id), eligible.below_id, eligible.since,
                                eligible.until)
            generation, (tail_rows, tail_vectors) = state.generation, state.tail.view()
            waiting = [record for record in state.pending.values() if eligible.admits(record.id, record.send_at)]
            ready = {id_: state.prepared[id_] for id_ in (r.id for r in waiting) if id_ in state.prepared}
            epoch = state.epoch
            # Deleted messages' vectors stay in the files until the next build: ask for as many more.
            deleted = len(state.deleted)
            wanted = limit + deleted
        missing = sorted((r for r in waiting if r.id not in ready), key=lambda r: r.id, reverse=True)
        unsearched = max(0, len(missing) - QUERY_EMBED_LIMIT)
        missing = missing[:QUERY_EMBED_LIMIT]
        if missing:
            try:
                fresh = self.embedder.vectors([record.content for record in missing], max_retries=0)
            except MemsvcError as error:
                log.warning("search could not embed pending messages",
                            extra={"session_id": session_id, "count": len(missing), "reason": error.reason})
                unsearched += len(missing)
            else:
                ready.update(zip((record.id for record in missing), fresh, strict=True))
                with state.lock:
                    if state.epoch == epoch:
                        state.prepared.update(zip((record.id for record in missing), fresh, strict=True))
        parts = [exact(tail_rows, tail_vectors, query, wanted, eligible)]
        if ready:
            parts.append(best(np.fromiter(ready, dtype=np.int64, count=len(ready)),
                              np.stack(list(ready.values())) @ query, wanted))
        if generation is not None:
            parts.append(generation.nearest(query, wanted, eligible, self.tuning.search_k))
        merged = best(np.concatenate([part.ids for part in parts]),
                      np.concatenate([part.scores for part in parts]).astype(np.float32), wanted)
        ids, scores = merged.ids, merged.scores
        if deleted:
            with state.lock:
                live = ~state.is_deleted(ids)
            ids, scores = ids[live], scores[live]
        return Nearest(ids[:limit].tolist(), scores[:limit].tolist(), unsearched)

    def _ensure_loaded(self, state: SessionVectors, records: list[Record] | None = None) -> None:
        with state.load_lock:
            if state.loaded:
                return
            with state.lock:
                epoch, recovered = state.epoch, state.recovered
            snapshot = records if records is not None else recovered
            if snapshot is None:
                return  # not recovered since it was last closed: the next recover brings the records
            loaded = load(state.directory, self.embedder, snapshot)
            with state.lock:
                if state.epoch == epoch:
                    state.install(loaded, snapshot)
        if state.needs_build(self.tuning.rebuild_rows):
            self._notify(state.id, self._builds)

    # -- the embedding worker -------------------------------------------------

    def _next(self, queue: collections.OrderedDict[str, None]) -> SessionVectors | None:
        """The next session with work in `queue`, waiting for one; None when stopping."""
        with self._wake:
            while not self._stopping:
                now = time.monotonic()
                delay = 1.0
                for session_id in list(queue):
                    with self._registry:
                        state = self._states.get(session_id)
                    if state is None:  # closed since it was queued
                        del queue[session_id]
                        continue
                    if state.retry_at <= now:
                        del queue[session_id]
                        return state
                    delay = min(delay, state.retry_at - now)
                self._wake.wait(delay)
        return None

    def _embed_loop(self) -> None:
        try:
            self.embedder.warm()
        except Exception:
            log.exception("embedder failed to load")
        while (state := self._next(self._ready)) is not None:
            # Let a busy session gather a batch: one embedding call and one tail write for many
            # messages, instead of one each competing with the server's threads for the GIL. While
            # other sessions wait their turn, embedding them is this one's gathering time: a catch-up
            # of many freshly opened sessions then goes as fast as the embedder, not one sleep each.
            with self._wake:
                others_waiting = bool(self._ready)
            if not others_waiting:
                time.sleep(EMBED_GATHER_SECONDS)
            try:
                more = self._embed_some(state)
            except Exception:
                self._failed("vector worker failed", state)
                more = True
            with self._wake:
                if more:
                    self._ready[state.id] = None
                self._embedded_batches += 1
                self._wake.notify_all()

    def _embed_some(self, state: SessionVectors) -> bool:
        """Embed and store one batch of the session's pending messages; True if more remain."""
        self._ensure_loaded(state)
        with state.lock:
            batch = list(itertools.islice(state.pending.values(), EMBED_BATCH))
            known = {record.id: state.prepared[record.id] for record in batch if record.id in state.prepared}
            epoch = state.epoch
        if not batch:
            return False
        todo = [record for record in batch if record.id not in known]
        try:
            with self._traces.span(state.id, messages=len(todo)):
                fresh = (self.embedder.vectors([record.content for record in todo]) if todo
                         else np.zeros((0, self.embedder.dimension), dtype=np.float32))
        except MemsvcError as error:
            delay = state.backoff()
            log.warning("embedding failed; will retry", extra={
                "session_id": state.id, "count": len(todo), "reason": error.reason, "retry_in_s": delay})
            return True
        known.update(zip((record.id for record in todo), fresh, strict=True))
        vectors = np.stack([known[record.id] for record in batch]).astype(np.float32)
        state.store(record_rows(batch), vectors, epoch, self.embedder)
        if state.needs_build(self.tuning.rebuild_rows):
            self._notify(state.id, self._builds)
        with state.lock:
            return bool(state.pending)

    # -- the build worker -------------------------------------------------------

    def _build_loop(self) -> None:
        while (state := self._next(self._builds)) is not None:
            try:
                self._build(state)
            except Exception:
                self._failed("vector build failed", state)
                self._notify(state.id, self._builds)

    def _failed(self, event: str, state: SessionVectors) -> None:
        """An attempt that raised, retried after a backoff. With the vectors' directory deleted under the
        server (health says so) every attempt fails alike: that is logged once, as the condition it is."""
        state.backoff()
        gone = self._directory.missing()
        if gone is None:
            log.exception(event, extra={"session_id": state.id})
        elif not self._directory_gone_said:
            self._directory_gone_said = True
            log.error("vectors cannot be stored: their directory was deleted or replaced; retried quietly "
                      "until memsvc restarts", extra={"path": str(gone)})

    def _build(self, state: SessionVectors) -> None:
        plan = state.plan_build(self.tuning.trees)
        if plan is None:
            return
        try:
            started = time.monotonic()
            process = subprocess.Popen(plan.command, stdin=subprocess.PIPE if plan.dropped else None,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            with state.lock:
                state.build_process = process
            stdout, stderr = process.communicate(build.drop_input(plan.dropped) if plan.dropped else None)
            if plan.epoch != state.epoch or self._stopping:
                return  # cleared or shutting down: the build was killed or its output is gone
            if process.returncode != 0:
                raise RuntimeError(f"build exited {process.returncode}: {stderr.decode(errors='replace')[-2000:]}")
            items = state.install_build(plan, stdout)
            log.info("vector generation built", extra={
                "session_id": state.id, "generation": plan.number, "items": items,
                "seconds": round(time.monotonic() - started, 2)})
        finally:
            state.end_build()
        if state.needs_build(self.tuning.rebuild_rows):
            self._notify(state.id, self._builds)

    def close(self, timeout: float = DRAIN_SECONDS) -> None:
        """Store what is ready (client-supplied vectors above all) for up to `timeout` seconds, then stop."""
        deadline = time.monotonic() + timeout
        with self._wake:
            while self._ready and (left := deadline - time.monotonic()) > 0:
                def progressed(seen: int = self._embedded_batches) -> bool:
                    return self._embedded_batches != seen

                self._wake.wait_for(progressed, left)
            self._stopping = True
            self._wake.notify_all()
        with self._registry:
            states = list(self._states.values())
        for state in states:
            state.stop_build()
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
