"""Corpus management of ``garag serve``: pages added and removed through the API while it answers.

An edit (an uploaded wiki-pages file, or a list of page ids to remove) is checked, saved as a file
that never changes after, and applied by an *update*: a background task that builds new pipelines
with the edit files appended to ``data.add_pages`` / ``data.remove_pages`` (the indexes are derived
from the already indexed corpus, pipeline/retrieval.py) and then switches them in with
:meth:`Service.swap`.  Verification goes on from the old pipelines meanwhile; a batch reads its
pipeline once, so each answer comes from one index version.  Updates run one at a time, in order.

The state lives under ``<state dir>/corpus``: the edit files, ``edits.json`` (every edit in order:
pending, applied or failed; written atomically) and ``updates/<id>.json`` (each update's status).
At start-up every config gets the applied edits of its corpus before it is built, and updates that
a restart interrupted are queued again.

A config's *corpus* is its base corpus with the config's own edits; an edit applies to every
served config with the same corpus and to no other.  Policies: an uploaded page whose id is in the
corpus replaces it (garag/corpus.py); removing an id the corpus does not hold (after the edits
queued before) is refused; an id an edit removed cannot be added again (garag applies removals
after additions, so it would stay removed), nor can ids that a file of ids could not name.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import queue
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from garag.artifacts import settings_hash, write_json_atomic, write_text_atomic
from garag.config import Config, validate_config
from garag.corpus import iter_add_file, read_page_ids
from garag.datasets import dataset_from_config
from garag.errors import ErrorPolicy, InputError
from garag.text import detokenize

if TYPE_CHECKING:
    from pipeline.verification import VerificationPipeline

    from .jobs import JobStore

logger = logging.getLogger(__name__)

# ids an answer lists in full; past this it names the first ones and counts the rest
LISTED_IDS = 20
Progress = Callable[[str, float], None]


def index_version_of(pipe: VerificationPipeline) -> str:
    """The version of the corpus and indexes a pipeline answers from: the first 16 hex digits of its
    corpus fingerprint (edits applied)."""
    return pipe.retrieval.fingerprint[:16]


class CorpusError(ValueError):
    """A corpus request that cannot be done; ``status``: 422 bad input, 404 unknown, 503 not ready."""

    def __init__(self, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.status = status


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _named(ids: list[str]) -> str:
    shown = ", ".join(repr(i) for i in ids[:LISTED_IDS])
    return shown + (f" and {len(ids) - LISTED_IDS} more" if len(ids) > LISTED_IDS else "")


def id_problem(page_id: str) -> str | None:
    """Why a file of page ids (one per line, stripped, ``#`` comments) could not name this id."""
    if not page_id.strip():
        return "is empty"
    if page_id != page_id.strip() or any(c in page_id for c in "\n\r"):
        return "starts or ends with white space, or holds a line break"
    if page_id.startswith("#"):
        return "starts with '#'"
    return None


def with_edits(config: Config, add: list[str], remove: list[str]) -> Config:
    """A copy of ``config`` with ``add`` / ``remove`` after its ``data.add_pages`` / ``data.remove_pages``
    (a new object even without edits: a served config's ``verifier.top_k`` changes per batch)."""
    data = config.data.model_copy(
        update={
            "add_pages": [*config.data.add_pages, *add],
            "remove_pages": [*config.data.remove_pages, *remove],
        }
    )
    return validate_config({**config.to_dict(), "data": data.model_dump()})


@dataclass(frozen=True)
class Base:
    """A corpus some served configs share: the base corpus with their own edits."""

    id: str
    corpus: str
    configs: tuple[str, ...]
    removed: frozenset[str]  # ids the configs' own remove files name


@dataclass
class Edit:
    """One edit of a corpus: a file of pages to add, or of page ids to remove."""

    seq: int
    kind: str  # "add" | "remove"
    file: str  # its name under the corpus state directory
    base: str
    pages: list[str]
    update: str
    created: str
    status: str = "pending"  # pending | applied | failed

    def view(self) -> dict:
        out = dataclasses.asdict(self) | {"pages": len(self.pages), "page_ids": self.pages[:LISTED_IDS]}
        return {k: v for k, v in out.items() if k not in ("file", "base")}


@dataclass
class CorpusUpdate:
    """The task that applies an edit: builds the new pipelines and switches them in."""

    kind: ClassVar[str] = "corpus_update"
    id: str
    base: str
    edit: int
    configs: list[str]
    status: str = "queued"  # queued | running | done | failed
    phase: str = "queued"
    progress: float = 0.0
    error: str | None = None
    created: str = field(default_factory=now)
    started: str | None = None
    finished: str | None = None
    result: dict = field(default_factory=dict)  # per config: index_version, pages, sentences
    job: str | None = None  # its row in the jobs of the service (GET /v1/jobs/{job})

    def view(self) -> dict:
        return {"kind": self.kind, "corpus_id": self.base} | {
            k: v for k, v in dataclasses.asdict(self).items() if k != "base"
        }


class CorpusManager:
    """The edits of the served corpora and the updates that apply them (see module docstring)."""

    def __init__(self, service: Any) -> None:  # app.serve.service.Service (it imports this module)
        self.service = service
        # the configs as loaded, before any edit (each update starts from these)
        self.originals = {n: validate_config(s.config.to_dict()) for n, s in service.served.items()}
        self.bases: dict[str, Base] = {}
        self.base_of: dict[str, str] = {}
        self.edits: list[Edit] = []
        self.updates: dict[str, CorpusUpdate] = {}
        self._lock = threading.RLock()
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._worker: threading.Thread | None = None
        self._counts: dict[str, tuple[int, int]] = {}  # index version -> (pages, sentences)
        self.jobs: JobStore | None = None  # where each update is listed as a job (attach_jobs)

    @property
    def root(self) -> Path:
        return self.service.settings.state / "corpus"

    # -- start-up ---------------------------------------------------------------------------------

    def prepare(self) -> None:
        """Before the pipelines are built: group the configs by corpus, read the saved edits and give
        each config the applied ones.

        Raises:
            ValueError: ``edits.json`` or an update's file is damaged (naming it).
        """
        groups: dict[str, list[str]] = {}
        info: dict[str, tuple[str, frozenset[str]]] = {}
        for name, cfg in self.originals.items():
            ds = dataset_from_config(cfg.data)
            key = settings_hash("serve-corpus", str(ds.corpus_path.resolve()),
                                [str(Path(f).resolve()) for f in ds.edits.add],
                                sorted(str(Path(f).resolve()) for f in ds.edits.remove))[:12]  # fmt: skip
            groups.setdefault(key, []).append(name)
            removed = frozenset(p for f in ds.edits.remove for _, p in read_page_ids(f))
            info[key] = (str(ds.corpus_path), removed)
            self.base_of[name] = key
        self.bases = {k: Base(k, info[k][0], tuple(v), info[k][1]) for k, v in groups.items()}
        manifest = self.root / "edits.json"
        if manifest.is_file():
            self.edits = [Edit(**e) for e in _read_json(manifest)["edits"]]
        updates = self.root / "updates"
        for path in sorted(updates.glob("*.json")) if updates.is_dir() else []:
            u = CorpusUpdate(**_read_json(path))
            self.updates[u.id] = u
        for name, s in self.service.served.items():
            add, remove = self.files(self.base_of[name], statuses=("applied",))
            s.config = with_edits(self.originals[name], add, remove)

    def resume(self) -> None:
        """Once the service is ready: queue again the updates a restart interrupted (in order)."""
        for e in self.edits:
            if e.status == "pending" and e.base in self.bases:
                u = self.updates.get(e.update) or CorpusUpdate(e.update, e.base, e.seq, [])
                u.configs = list(self.bases[e.base].configs)
                u.status, u.phase, u.progress, u.started = "queued", "queued again after a restart", 0.0, None
                self._save_update(u)
                self._enqueue(u.id)

    def close(self) -> None:
        if self._worker is not None:
            self._queue.put(None)
            self._worker.join(1)

    # -- reading ----------------------------------------------------------------------------------

    def files(
        self, base: str, through: int | None = None, statuses: tuple[str, ...] = ("applied", "pending")
    ):
        """``(add files, remove files)`` of a corpus's edits with these statuses, up to edit ``through``."""
        add, remove = [], []
        for e in self.edits:
            if e.base == base and e.status in statuses and (through is None or e.seq <= through):
                (add if e.kind == "add" else remove).append(str(self.root / e.file))
        return add, remove

    def base_for(self, config: str | None) -> Base:
        if config is None:
            config = next(iter(self.service.served))
        if config not in self.base_of:
            if config not in self.service.served:
                raise CorpusError(
                    f"config: unknown config {config!r}; loaded: {', '.join(self.service.served)}"
                )
            raise CorpusError("not ready: the models are loading", 503)
        return self.bases[self.base_of[config]]

    def _pipe(self, config: str) -> VerificationPipeline:
        if not self.service.ready:
            raise CorpusError("not ready: " + (self.service.error or "the models are loading"), 503)
        pipe = self.service.served[config].pipe
        assert pipe is not None  # ready
        return pipe

    def counts(self, pipe: VerificationPipeline) -> tuple[int, int]:
        """``(pages, sentences)`` of a pipeline's corpus (counted once per index version)."""
        version = pipe.retrieval.fingerprint
        if version not in self._counts:
            self._counts[version] = (pipe.store.n_pages, len(pipe.store))
        return self._counts[version]

    def describe(self) -> dict:
        """``GET /v1/corpus``: per config its corpus, counts and index version; per corpus its edits;
        the updates not finished and the 10 most recent finished ones."""
        with self._lock:
            configs = []
            for name in self.service.served:
                pipe = self._pipe(name)
                pages, sentences = self.counts(pipe)
                base = self.bases[self.base_of[name]]
                applied = sum(e.base == base.id and e.status == "applied" for e in self.edits)
                configs.append({"name": name, "corpus_id": base.id, "corpus": base.corpus, "pages": pages,
                                "sentences": sentences, "index_version": index_version_of(pipe),
                                "edits_applied": applied})  # fmt: skip
            corpora = [
                {
                    "id": b.id,
                    "corpus": b.corpus,
                    "configs": list(b.configs),
                    "edits": [e.view() for e in self.edits if e.base == b.id],
                }  # fmt: skip
                for b in self.bases.values()
            ]
            ordered = sorted(self.updates.values(), key=lambda u: u.edit)
            done = [u for u in ordered if u.status in ("done", "failed")]
            shown = [u for u in ordered if u.status not in ("done", "failed")] + done[-10:][::-1]
            return {"configs": configs, "corpora": corpora, "updates": [u.view() for u in shown]}

    def update(self, update_id: str) -> dict:
        with self._lock:
            if update_id not in self.updates:
                raise CorpusError(f"no corpus update {update_id!r}", 404)
            return self.updates[update_id].view()

    def page(self, page_id: str, config: str | None) -> dict:
        """A page's sentences in the corpus a config answers from now."""
        name = config or next(iter(self.service.served))
        self.base_for(name)
        pipe = self._pipe(name)
        sentences = pipe.store.page(page_id)
        if not sentences and not pipe.store.has_page(page_id):
            raise CorpusError(
                f"page {page_id!r} is not in the corpus of config {name!r} "
                f"(index version {index_version_of(pipe)})",
                404,
            )
        lines = [{"line": s.id.line, "text": detokenize(s.text), "raw_text": s.text} for s in sentences]
        return {
            "page": page_id,
            "config": name,
            "index_version": index_version_of(pipe),
            "sentences": lines,
        }

    # -- edits ------------------------------------------------------------------------------------

    def _present(self, base: Base) -> Callable[[str], bool]:
        """Whether a page id will be in the corpus once the edits queued so far are applied."""
        live = [e for e in self.edits if e.base == base.id and e.status != "failed"]
        removed = base.removed.union(*(e.pages for e in live if e.kind == "remove"))
        pending = set().union(*(e.pages for e in live if e.kind == "add" and e.status == "pending"))
        store = self._pipe(base.configs[0]).store
        return lambda p: p not in removed and (p in pending or store.has_page(p))

    def _removed(self, base: Base) -> set[str]:
        live = [e for e in self.edits if e.base == base.id and e.status != "failed" and e.kind == "remove"]
        return set(base.removed).union(*(e.pages for e in live))

    def add_pages(self, body: bytes, config: str | None) -> dict:
        """Check an upload of wiki-pages lines and queue the update that adds them (nothing is kept
        when a line is bad: the error names it)."""
        base = self.base_for(config)
        self._pipe(base.configs[0])
        tmp = self.root / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        staged = tmp / f"{uuid.uuid4().hex}.jsonl"
        try:
            staged.write_bytes(body)
            try:
                ids = [p.id for p in iter_add_file(staged, ErrorPolicy())]
            except InputError as e:
                where = f"line {e.line}: " if e.line is not None else ""
                raise CorpusError(f"{where}{e.reason}") from None
            if not ids:
                raise CorpusError("the upload holds no page (wiki-pages JSON lines: id, text, lines)")
            bad = [f"page id {p!r} {why}" for p in ids if (why := id_problem(p))]
            if bad:
                raise CorpusError(f"{bad[0]}: it could not be removed later")
            with self._lock:
                gone = [p for p in ids if p in self._removed(base)]
                if gone:
                    raise CorpusError(f"pages {_named(gone)} were removed by an earlier edit and cannot be "
                                      "added again (removals apply after additions)")  # fmt: skip
                present = self._present(base)
                replaced = [p for p in ids if present(p)]
                name = f"add-{self._next_seq():05d}-{hashlib.sha256(body).hexdigest()[:12]}.jsonl"
                staged.replace(self.root / name)
                return self._queue_edit(base, "add", name, ids) | {"replaced": replaced}
        finally:
            staged.unlink(missing_ok=True)

    def remove_pages(self, ids: list[str], config: str | None) -> dict:
        """Check page ids and queue the update that removes them."""
        base = self.base_for(config)
        ids = list(dict.fromkeys(ids))
        for i, p in enumerate(ids):
            if (why := id_problem(p)) is not None:
                raise CorpusError(f"ids.{i}: page id {p!r} {why}")
        with self._lock:
            present = self._present(base)
            unknown = [p for p in ids if not present(p)]
            if unknown:
                raise CorpusError(f"ids: not in the corpus of {', '.join(base.configs)}: {_named(unknown)}")
            text = "".join(p + "\n" for p in ids)
            name = f"remove-{self._next_seq():05d}-{hashlib.sha256(text.encode()).hexdigest()[:12]}.txt"
            write_text_atomic(self.root / name, text)
            return self._queue_edit(base, "remove", name, ids) | {"replaced": []}

    def _next_seq(self) -> int:
        return max((e.seq for e in self.edits), default=0) + 1

    def _queue_edit(self, base: Base, kind: str, name: str, ids: list[str]) -> dict:
        seq = self._next_seq()
        u = CorpusUpdate(uuid.uuid4().hex[:16], base.id, seq, list(base.configs))
        edit = Edit(seq, kind, name, base.id, ids, u.id, u.created)
        if self.jobs is not None:
            what = f"{kind} {len(ids)} page{'s' * (len(ids) != 1)}"
            u.job = self.jobs.create(
                u.kind, base.configs[0], [{"update": u.id}], {"name": f"corpus: {what}", "update": u.id}
            ).id
        self._save_update(u)
        self.edits.append(edit)
        self._save_edits()
        self._enqueue(u.id)
        others = [n for n in self.service.served if n not in base.configs]
        return {"update": u.view(), "edit": edit.view(), "configs": list(base.configs), "not_applied": others}

    # -- updates ----------------------------------------------------------------------------------

    def _enqueue(self, update_id: str) -> None:
        if self._worker is None:
            self._worker = threading.Thread(target=self._work, name="garag-corpus", daemon=True)
            self._worker.start()
        self._queue.put(update_id)

    def _work(self) -> None:
        while (update_id := self._queue.get()) is not None:
            u = self.updates[update_id]
            with self._lock:
                u.status, u.started, u.phase = "running", now(), "starting"
                self._job_state(u)
                self._save_update(u)

            def progress(phase: str, fraction: float, u: CorpusUpdate = u) -> None:
                with self._lock:
                    u.phase, u.progress = phase, round(fraction, 4)
                    self._save_update(u)

            try:
                result = self.run_corpus_update(u, progress)
            except Exception as e:  # noqa: BLE001 - the update's record says why; the service goes on
                logger.error("corpus update %s failed: %s: %s", u.id, type(e).__name__, e)
                with self._lock:
                    for edit in self.edits:
                        if edit.seq == u.edit:
                            edit.status = "failed"
                    self._save_edits()
                    u.status, u.phase, u.finished = "failed", "failed", now()
                    u.error = f"{type(e).__name__}: {' '.join(str(e).split())}"
                    self._job_state(u)  # the job row first: a reader seeing the update ended sees it too
                    self._save_update(u)
                continue
            with self._lock:
                u.status, u.phase, u.progress, u.finished, u.result = "done", "done", 1.0, now(), result
                self._job_state(u)
                self._save_update(u)

    # -- the jobs list ------------------------------------------------------------------------------

    def attach_jobs(self, store: JobStore) -> None:
        """List every update from now on as a job of ``store`` (kind ``corpus_update``, one item), and
        bring the rows of updates that ended while none was attached up to date."""
        self.jobs = store
        for u in list(self.updates.values()):
            if u.job is not None and u.status in ("done", "failed"):
                self._job_state(u)

    def _job_state(self, u: CorpusUpdate) -> None:
        """The update's job row follows its status (the corpus worker runs it, not the job runner)."""
        if self.jobs is None or u.job is None:
            return
        try:
            version = next((r["index_version"] for r in u.result.values()), "")
            self.jobs.start(u.job, version)
            if u.status == "done":
                self.jobs.finish(u.job, "done", metrics={"configs": u.result})
            elif u.status == "failed":
                self.jobs.finish(u.job, "failed", error=u.error)
        except Exception as e:  # noqa: BLE001 - the update itself is done; only its listing lags
            logger.warning("corpus update %s: its job row could not be written: %s", u.id, e)

    def run_corpus_update(self, update: CorpusUpdate, progress_callback: Progress) -> dict:
        """Apply an update's edit (with every edit before it that did not fail): build a new pipeline
        per config of its corpus, then switch them all in at once.

        Args:
            update: the update (its corpus and its edit's number).
            progress_callback: ``(phase, fraction done)``, called as each config's build starts.

        Returns:
            Per config: the new ``index_version``, ``pages`` and ``sentences``.
        """
        add, remove = self.files(update.base, through=update.edit)
        names = self.bases[update.base].configs
        built: dict[str, VerificationPipeline] = {}
        for i, name in enumerate(names):
            progress_callback(f"building the indexes of {name} ({i + 1} of {len(names)})", i / len(names))
            built[name] = self.service.build_pipeline(with_edits(self.originals[name], add, remove))
        out = {}
        for name, pipe in built.items():
            pages, sentences = self.counts(pipe)
            out[name] = {
                "index_version": index_version_of(pipe),
                "pages": pages,
                "sentences": sentences,
            }
        progress_callback("switching to the new index", 1.0)
        with self._lock:
            self.service.swap(built)
            for e in self.edits:
                if e.base == update.base and e.seq <= update.edit and e.status == "pending":
                    e.status = "applied"
            self._save_edits()
        return out

    # -- state files ------------------------------------------------------------------------------

    def _save_edits(self) -> None:
        write_json_atomic(self.root / "edits.json", {"edits": [dataclasses.asdict(e) for e in self.edits]})

    def _save_update(self, u: CorpusUpdate) -> None:
        self.updates[u.id] = u
        write_json_atomic(self.root / "updates" / f"{u.id}.json", dataclasses.asdict(u))


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: damaged corpus state ({e}); move it away to start without it") from None
