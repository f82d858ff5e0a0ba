"""What ``garag serve`` keeps loaded: one verification pipeline per config, each behind a micro-batcher.

The pipelines (store, indexes, verifier, graph stage) are built once, in a
background thread, so that ``/v1/health`` answers at once and ``/v1/ready``
says when verification can start.  Each config's pipeline is used by its own
batcher thread only.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from eval.verification_eval import result_record
from garag.config import (
    Config,
    check_override_scopes,
    config_files,
    config_name,
    load_config,
    scoped_overrides,
)
from garag.text import detokenize
from garag.types import Claim, SentenceId
from pipeline.graph_reasoning import fact_graph_view
from pipeline.verification import ClaimResult, VerificationPipeline, build_with_pair_memories
from verifier.pair_memory import PairMemories

from .batcher import MicroBatcher
from .corpus import CorpusManager, index_version_of

logger = logging.getLogger(__name__)

# GRAAL hits whose provenance a response lists
PATH_HITS = 10


LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
# requests whose bodies are uploads (``ServeSettings.max_upload``, not ``max_body``): path prefixes
UPLOAD_PATHS = ("/v1/jobs", "/v1/corpus")


@dataclass
class ServeSettings:
    """Limits and batching of the service (``garag serve`` flags).

    Attributes:
        max_batch: most claims in one ``/v1/verify/batch`` request (413 beyond).
        micro_batch: most claims in one verifier batch (concurrent requests are joined).
        max_wait: at most this many seconds a batch waits for more requests after its first one (it
            stops earlier once 3 ms pass without a new one).
        max_body: most bytes in a request body (413 beyond).
        timeout: seconds a request may wait for its verdict (504 after).
        api_key: required as ``X-API-Key`` on /v1 (except /v1/health) when set.
        results_dir: where ``compare`` runs are read from.
        max_queue: most claims waiting per config; a request beyond gets 429 with ``Retry-After``.
        allowed_hosts: the names a request's ``Host`` header may give (any port); others get 400,
            so that a web page on another site cannot reach a loopback server by DNS rebinding.
        max_upload: most bytes in an upload (a claims file for a job, wiki-pages for the corpus:
            the paths under :data:`UPLOAD_PATHS`); 413 beyond.
        state_dir: what the service keeps across restarts (SQLite files of jobs and history,
            uploaded corpus pages); default ``<results_dir>/serve``.
        history: keep every ad-hoc verification in ``<state>/history.sqlite`` (``--no-history``: no).
    """

    max_batch: int = 64
    micro_batch: int = 16
    max_wait: float = 0.05
    max_body: int = 256 * 1024
    timeout: float = 120.0
    api_key: str | None = None
    results_dir: Path = Path("results")
    max_queue: int = 256
    allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS
    max_upload: int = 64 * 1024 * 1024
    state_dir: Path | None = None
    history: bool = True

    @property
    def state(self) -> Path:
        """The state directory (``state_dir``, else ``<results_dir>/serve``); what writes under it first
        makes it."""
        return self.state_dir if self.state_dir is not None else self.results_dir / "serve"


@dataclass
class Served:
    """One loaded config."""

    name: str
    source: str
    config: Config
    pipe: VerificationPipeline | None = None
    batcher: MicroBatcher | None = None
    top_k: int = field(init=False)  # the config's own; a request's ``k`` changes the config's for its batch

    def __post_init__(self) -> None:
        self.top_k = self.config.verifier.top_k


def load_configs(specs: Sequence[str | Path], overrides: Sequence[str] = ()) -> dict[str, tuple[str, Config]]:
    """``name -> (source, config)``: a config spec (a file, or files joined by ``+``) is named by
    :func:`garag.config.config_name` (names must differ); ``NAME:key=value`` overrides apply to NAME only."""
    names: dict[str, str | Path] = {}
    for spec in specs:
        for path in config_files(spec):
            if not path.is_file():
                raise FileNotFoundError(f"{path}: no such config file")
        name = config_name(spec)
        if name in names:
            raise ValueError(f"two configs are named {name!r} ({names[name]} and {spec})")
        names[name] = spec
    check_override_scopes(list(names), overrides)
    return {
        name: (str(spec), load_config(spec, scoped_overrides(name, overrides)))
        for name, spec in names.items()
    }


class Service:
    """The loaded pipelines and their batchers.

    Args:
        configs: ``name -> (source, config)``.
        settings: limits and batching.
        factory: ``config -> unbuilt pipeline`` (tests may pass a cheaper one).
    """

    def __init__(
        self,
        configs: dict[str, tuple[str, Config]],
        settings: ServeSettings,
        factory: Callable[[Config], VerificationPipeline] | None = None,
    ) -> None:
        if not configs:
            raise ValueError("garag serve needs at least one config")
        self.settings = settings
        self.served = {n: Served(n, src, cfg) for n, (src, cfg) in configs.items()}
        self.factory = factory or (lambda cfg: VerificationPipeline(cfg, progress=False))
        # the configs verify the same claims against many of the same sentences: one memory of the
        # NLI pairs scored serves them all (verifier/pair_memory.py)
        self.pair_memories = PairMemories()
        self.ready = False
        self.error: str | None = None
        self._thread: threading.Thread | None = None
        self._swap = threading.Lock()
        self.corpus = CorpusManager(self)  # pages added and removed while serving (app/serve/corpus.py)

    # -- loading ----------------------------------------------------------------------------------

    def load(self) -> Service:
        """Build every pipeline (in this thread); on failure ``error`` says why and ready stays False."""
        try:
            self.corpus.prepare()  # the saved corpus edits, before anything is built
            for s in self.served.values():
                started = time.perf_counter()
                s.pipe = self.build_pipeline(s.config)
                s.batcher = MicroBatcher(
                    self._batch_fn(s),
                    self.settings.micro_batch,
                    self.settings.max_wait,
                    f"batch-{s.name}",
                    max_queue=self.settings.max_queue,
                )
                logger.info("config %s loaded in %.1f s", s.name, time.perf_counter() - started)
            self.ready = True
            self.corpus.resume()
        except Exception as e:  # noqa: BLE001 - reported by /v1/ready, the process keeps answering
            logger.error("loading failed: %s: %s", type(e).__name__, e)
            self.error = f"{type(e).__name__}: {' '.join(str(e).split())}"
        return self

    def build_pipeline(self, config: Config) -> VerificationPipeline:
        """``config``'s pipeline from the factory, built, its NLI verifiers sharing the service's memory
        of scored pairs where the pipeline takes one."""
        return build_with_pair_memories(self.factory(config), self.pair_memories)

    def start(self) -> Service:
        """Load in a background thread (``/v1/ready`` turns true when done)."""
        self._thread = threading.Thread(target=self.load, name="garag-load", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self.corpus.close()
        for s in self.served.values():
            if s.batcher is not None:
                s.batcher.close()

    # -- verification -----------------------------------------------------------------------------

    def waiting(self, name: str) -> int:
        """Claims waiting in config ``name``'s queue (0 before it is loaded)."""
        batcher = self.served[name].batcher
        return batcher.waiting() if batcher is not None else 0

    def submit(self, name: str, claims: Sequence[str], k: int | None):  # noqa: ANN201 - futures
        """Queue claims for config ``name``; one future per claim (its response dict)."""
        batcher = self.served[name].batcher
        if batcher is None:
            raise RuntimeError("the service is not ready")
        return batcher.submit_many([(c, k) for c in claims])

    def submit_claims(self, name: str, claims: Sequence[Claim], k: int | None = None):  # noqa: ANN201
        """Queue a batch of whole claims (ids, gold labels and evidence kept) for config ``name``, beside
        the requests, as one item: they run in one pipeline batch (with any requests waiting), whatever
        ``micro_batch`` is, as ``garag predict`` runs them.  One future, holding their records as
        ``garag predict`` writes them (:func:`eval.verification_eval.result_record`, with the
        ``index_version`` they answered from), in order."""
        batcher = self.served[name].batcher
        if batcher is None:
            raise RuntimeError("the service is not ready")
        return batcher.submit_many([(tuple(claims), k)])[0]

    def _batch_fn(self, s: Served) -> Callable[[Sequence[tuple[str, int | None]]], list[dict]]:
        def run(items: Sequence[tuple[str, int | None]]) -> list[dict]:
            pipe = s.pipe  # read once: the whole batch answers from one index version (see swap)
            assert pipe is not None
            out: list[dict | None] = [None] * len(items)
            default_k = s.top_k
            for k in sorted({k or default_k for _, k in items}):
                idx = [i for i, (_, ik) in enumerate(items) if (ik or default_k) == k]
                # a job's batch is one item, a tuple of whole claims (submit_claims): their records
                owners = [(i, c) for i in idx for c in self._item_claims(i, items[i][0])]
                pipe.config.verifier.top_k = k  # this thread is the pipeline's only user
                try:
                    results = pipe.run([c for _, c in owners])
                finally:
                    pipe.config.verifier.top_k = default_k
                version = index_version_of(pipe)
                for (i, _), r in zip(owners, results, strict=True):
                    if isinstance(items[i][0], tuple):
                        record = result_record(r, pipe.dataset) | {"index_version": version}
                        out[i] = [*(out[i] or []), record]  # type: ignore[list-item]
                    else:
                        out[i] = self.response(s, r, pipe)
            return out  # type: ignore[return-value]

        return run

    @staticmethod
    def _item_claims(i: int, item: str | tuple[Claim, ...]) -> Sequence[Claim]:
        return item if isinstance(item, tuple) else [Claim(i, item)]

    def response(self, s: Served, result: ClaimResult, pipe: VerificationPipeline | None = None) -> dict:
        """The ``/v1/verify`` response of one claim result (from ``pipe``, default the served one)."""
        pipe = pipe or s.pipe
        assert pipe is not None
        v = result.verdict
        cited = set(v.evidence)
        found: dict[SentenceId, set[str]] = {}
        for name, hits in result.retrieval.per_retriever.items():
            base = name.split("@", 1)[0]  # "bm25@<subquestion>": a subquestion's own list
            for h in hits:
                found.setdefault(h.sentence, set()).add(base)
        evidence = [
            {
                "page": e.sentence.page,
                "line": e.sentence.line,
                "text": detokenize(e.text),
                "raw_text": e.text,
                "score": float(e.score),
                "retrievers": sorted(found.get(e.sentence, [])),
                "cited": e.sentence in cited,
            }
            for e in result.evidence
        ]
        graph = None
        if result.graph is not None:
            view = fact_graph_view(result.graph.facts, pipe.config.propagation, result.graph.claim_entities)
            texts = {(e.sentence.page, e.sentence.line): e.text for e in result.evidence}
            for node in view["nodes"]:
                if node["kind"] == "fact":
                    key = (node["page"], node["line"])
                    if key not in texts:
                        sent = pipe.store.get(SentenceId(node["page"], node["line"]))
                        texts[key] = sent.text if sent is not None else ""
                    node["text"], node["raw_text"] = detokenize(texts[key]), texts[key]
            graph = {
                **view,
                "claim_entities": list(result.graph.claim_entities),
                "covered": list(result.graph.covered),
            }
        seconds = dict(result.seconds)
        paths: list[dict] = []
        graal = pipe.retrieval.retrievers.get("graal")
        if graal is not None:
            t0 = time.perf_counter()
            paths = graal_paths(graal, result.claim.text)
            seconds["graal_paths"] = time.perf_counter() - t0
        return {
            "claim": result.claim.text,
            "config": s.name,
            "label": v.label.value,
            "dataset_label": pipe.dataset.verdict_to_label.get(v.label.value, v.label.value),
            "scores": {lab.value: round(float(p), 6) for lab, p in v.scores.items()},
            "explanation": v.explanation,
            "evidence": evidence,
            "steps": result.program,
            "subquestions": list(result.subquestions),
            "graph": graph,
            "graal_paths": paths,
            "timings": {k: round(x, 6) for k, x in seconds.items()},
            "index_version": index_version_of(pipe),
        }

    # -- corpus -----------------------------------------------------------------------------------

    def index_version(self, name: str) -> str:
        """The version of the corpus and indexes config ``name`` answers from: the first 16 hex digits
        of its corpus fingerprint (edits applied); "" before it is loaded."""
        s = self.served[name]
        return index_version_of(s.pipe) if s.pipe is not None else ""

    def swap(self, pipes: dict[str, VerificationPipeline]) -> None:
        """Serve built pipelines in place of the loaded ones (a corpus update): a batch reads its
        config's pipeline once as it starts, so it answers from the old one or the new one, never
        from both; a batch already running finishes on the old one."""
        with self._swap:
            for name, pipe in pipes.items():
                s = self.served[name]
                s.pipe, s.config = pipe, pipe.config

    def sentence_text(self, corpus: str, sid: SentenceId) -> str | None:
        """A sentence's text from a loaded pipeline whose corpus is ``corpus`` (None when none is)."""
        for s in self.served.values():
            if s.pipe is None or s.pipe.retrieval.store is None:
                continue
            if str(s.pipe.dataset.corpus_path) == corpus:
                sent = s.pipe.store.get(sid)
                return sent.text if sent is not None else None
        return None

    def describe(self) -> list[dict]:
        return [
            {
                "name": s.name,
                "mode": s.config.pipeline.mode,
                "verifier": s.config.pipeline.verifier,
                "llm_judge": s.config.verifier.llm_judge,  # never / two_way (2-way data) / always
                "retrievers": list(s.config.retrieval.retrievers),
                "top_k": s.top_k,  # not the config's, which a batch in flight may have changed
                "dataset": s.config.data.dataset,
                "source": s.source,
            }
            for s in self.served.values()
        ]


def graal_paths(graal, claim: str, limit: int = PATH_HITS) -> list[dict]:  # noqa: ANN001 - GraalRetriever
    """The provenance of GRAAL's top hits for a claim: paths between claim entities, pages, mentions."""
    out = []
    for hit in graal.search(claim).hits[:limit]:
        for p in hit.provenance:
            out.append(
                {
                    "page": hit.hit.sentence.page,
                    "line": hit.hit.sentence.line,
                    "reason": p.reason,
                    "entities": list(p.entities),
                    "edges": [[e.u, e.v] for e in p.edges],
                }
            )
    return out
