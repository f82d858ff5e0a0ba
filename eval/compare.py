"""Run several configurations over the same claims and compare them (``garag compare``).

Each config spec (a file, or files stacked with ``+``) gives one system, named by its files'
stems joined by ``-`` (``configs/graph.yaml+configs/joint.yaml``: ``graph-joint``); every system
is the same pipeline object built from its config.  ``results/<run_id>/``
holds:

* ``run.json``: the claims (ids, sample size, seed, file hash) and the systems;
* ``configs/<system>.yaml``: each resolved config;
* ``predictions/<system>.jsonl``: one record per claim, written as it is made
  (FEVER submission fields, explanation, label scores, per-stage timings,
  retrieved ids per retriever); ``<system>.faithful.jsonl`` the faithfulness
  check of each explanation; ``<system>.timing.json`` the wall time;
* ``env.json``; and, from :func:`rescore`, ``metrics.json``, ``metrics.csv``,
  ``report.md`` and ``figures/``.

A killed run started again skips the claims already written; predictions do
not depend on where a run was interrupted.  :func:`rescore` reads only files.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from tqdm import tqdm

from eval.run_env import ENV_FILE, env_path, environment, file_sha256, read_env, tree_hashes
from eval.run_hash import run_config_hash
from eval.verification_eval import (
    RETRIEVED_KEPT,
    PipelineFactory,
    default_pipeline,
    result_record,
    validate_claims,
)
from garag.artifacts import write_json_atomic, write_text_atomic
from garag.config import Config, check_override_scopes, config_name, load_config, scoped_overrides
from garag.datasets import Dataset, dataset_from_config
from garag.errors import ErrorPolicy
from garag.jsonl import ResumableJsonl
from garag.runs import check_identity, output_dir, run_lock, set_aside
from garag.types import Claim, Evidence
from pipeline.retrieval import corpus_fingerprint
from pipeline.verification import build_with_pair_memories
from verifier.pair_memory import PairMemories

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class System:
    """One configuration under comparison.

    Attributes:
        name: the spec's name (:func:`garag.config.config_name`, made unique), used in file names
            and tables.
        source: the config spec it came from (a file, or files joined by ``+``).
        config: the resolved config.
    """

    name: str
    source: str
    config: Config


@dataclass(frozen=True)
class CompareOutcome:
    """Where a comparison wrote and what it did."""

    run_dir: Path
    written: dict[str, int]
    resumed: dict[str, int]
    metrics: dict


def load_systems(configs: Sequence[str | Path], overrides: Sequence[str] = ()) -> list[System]:
    """One ``System`` per config spec, named by :func:`garag.config.config_name` (``-2``, ``-3``
    appended to repeats); an override ``NAME:key=value`` applies to the system named NAME only."""
    if len(configs) < 2:
        raise ValueError(f"compare needs at least two configs, got {len(configs)}")
    names: list[str] = []
    for spec in configs:
        stem = config_name(spec)
        name, n = stem, 1
        while name in names:
            n += 1
            name = f"{stem}-{n}"
        names.append(name)
    check_override_scopes(names, overrides)
    return [
        System(name, str(spec), load_config(spec, scoped_overrides(name, overrides)))
        for name, spec in zip(names, configs, strict=True)
    ]


def stratified_sample(claims: Sequence[Claim], n: int, seed: int) -> list[Claim]:
    """``n`` claims drawn by label in proportion to the label counts, in file order (seeded).

    Each label gets ``floor(n * share)`` claims, and the remaining ones go to the labels with
    the largest remainders (ties by label name).  ``n >= len(claims)`` returns all claims.
    """
    if n < 1:
        raise ValueError(f"sample size must be >= 1, got {n}")
    if n >= len(claims):
        return list(claims)
    by_label: dict[str, list[int]] = {}
    for i, c in enumerate(claims):
        by_label.setdefault(str(c.label), []).append(i)
    total = len(claims)
    quota = {lab: n * len(idx) // total for lab, idx in by_label.items()}
    rest = n - sum(quota.values())
    order = sorted(by_label, key=lambda lab: (-(n * len(by_label[lab]) % total), lab))
    for lab in order[:rest]:
        quota[lab] += 1
    rng = random.Random(seed)
    chosen: list[int] = []
    for lab in sorted(by_label):
        chosen += rng.sample(by_label[lab], quota[lab])
    return [claims[i] for i in sorted(chosen)]


def default_run_id(dataset: str, systems: Sequence[System], sample: int | None, seed: int) -> str:
    part = systems[0].config.data.part if systems else "all"
    run_id = f"{dataset}{'' if part == 'all' else '-' + part}-" + "-vs-".join(s.name for s in systems)
    return run_id + (f"-n{sample}-seed{seed}" if sample else "")


# What a compare run writes besides run.json: set aside together, the old run stays a run directory
# (``garag evaluate --run <run_dir>/stale-<time>`` re-scores it with its own configs).
RUN_OUTPUTS = (
    "predictions",
    "configs",
    ENV_FILE,
    "metrics.json",
    "metrics.csv",
    "report.md",
    "figures",
    "subgraphs",
)


def _check_identity(run_dir: Path, identity: dict, force_new: bool = False) -> None:
    path = run_dir / "run.json"
    outputs = [run_dir / name for name in RUN_OUTPUTS]
    check_identity(path, identity, force_new, outputs, "a run", "another --run-id", together=True)
    write_json_atomic(path, identity)


def _check_models(run_dir: Path, name: str, before: dict | None, now: dict, force_new: bool) -> None:
    """Refuse to add predictions of a system whose model or index files changed since it started."""
    predictions = run_dir / "predictions" / f"{name}.jsonl"
    if before is None or before == now or not predictions.is_file():
        return
    changed = sorted(k for k in now if before.get(k) != now[k])
    if not force_new:
        raise ValueError(
            f"{run_dir}: system {name!r} has predictions made with other model or index files "
            f"({', '.join(changed)} differ); use --force-new to set them aside, or another --run-id"
        )
    moved = set_aside([predictions, predictions.with_name(f"{name}.faithful.jsonl")])
    logger.warning("%s: %s of %s changed; its predictions set aside as %s", run_dir, changed, name, moved)


def prediction_record(result: Any, dataset: Dataset, store: Any) -> dict:
    """``result_record`` plus each retriever's ranked ids and the text of the evidence read."""
    rec = result_record(result, dataset)
    rec["per_retriever"] = {
        name: [h.sentence.to_json() for h in hits[:RETRIEVED_KEPT]]
        for name, hits in result.retrieval.per_retriever.items()
    }
    rec["retriever_seconds"] = {k: round(v, 6) for k, v in result.retrieval.seconds.items()}
    rec["evidence_text"] = [e.text for e in result.evidence]
    usage = getattr(result, "llm", None)
    if usage:
        rec["llm"] = dict(usage)
    return rec


def faithfulness_judge(verifier: Any) -> Any:
    """The verifier that judges faithfulness: the NLI classifier (the report's "faithful (NLI)").

    An LLM verifier is judged by its NLI fallback: asking the LLM again would double a run's LLM
    calls (~10 s each here) to check the LLM against itself.  A verifier with no fallback judges
    itself.  A verifier wrapped in the LLM judge (``verifier.llm_judge``) is read without the judge,
    which would ask the LLM again too.
    """
    verifier = getattr(verifier, "inner", verifier)
    fallback = getattr(verifier, "fallback", None)
    return fallback if fallback is not None else verifier


def _judge_faithfulness(pipe: Any, records: Sequence[dict]) -> list[dict]:
    """The NLI verifier reads only the sentences an explanation cites; faithful when it reaches
    the same verdict as the system."""
    from eval.slices import cited_ids

    claims, evidence, keep = [], [], []
    for r in records:
        sentences = [pipe.store.get(s) for s in cited_ids(r.get("explanation", ""))]
        ev = [Evidence(s.id, s.text, 1.0) for s in sentences if s is not None]
        if ev:
            claims.append(r["claim"])
            evidence.append(ev)
            keep.append(r)
    out = [{"id": r["id"], "faithful": None} for r in records]
    if keep:
        verdicts = faithfulness_judge(pipe.verifier).verify_batch(claims, evidence)
        by_id = {r["id"]: v.label.value == r["predicted_label"] for r, v in zip(keep, verdicts, strict=True)}
        out = [{"id": r["id"], "faithful": by_id.get(r["id"])} for r in records]
    return out


def _model_hashes(pipe: Any) -> dict:
    info: dict = {"verifier": getattr(pipe, "model_path", "")}
    path = Path(info["verifier"]) if info["verifier"] else None
    if path is not None and path.exists():
        info["verifier_files"] = tree_hashes(path)
    mix = getattr(pipe, "mix_model_path", "")
    if mix:  # verifier.mix_weight's second verifier (absent otherwise: older runs compare as before)
        info["mix_verifier"] = mix
        if Path(mix).exists():
            info["mix_verifier_files"] = tree_hashes(Path(mix))
    artifacts = getattr(getattr(pipe, "retrieval", None), "artifacts", {}) or {}
    info["artifacts"] = {name: Path(p).name for name, p in artifacts.items()}
    return info


def _complete(pred_dir: Path, name: str, claims: Sequence[Claim], faithfulness: bool) -> bool:
    """Whether every claim has a prediction (and a faithfulness verdict when asked for)."""
    files = [pred_dir / f"{name}.jsonl"] + ([pred_dir / f"{name}.faithful.jsonl"] if faithfulness else [])
    for path in files:
        if not path.is_file():
            return False
        done = ResumableJsonl(path)
        if not all(done.is_done(c.id) for c in claims):
            return False
    return True


def _predict_system(
    system: System,
    pipe: Any,
    claims: Sequence[Claim],
    pred_dir: Path,
    batch_size: int,
    progress: bool,
    faithfulness: bool,
) -> tuple[int, int]:
    writer = ResumableJsonl(pred_dir / f"{system.name}.jsonl")
    todo = [c for c in claims if not writer.is_done(c.id)]
    resumed = len(claims) - len(todo)
    if resumed:
        logger.info("%s: resuming, %d of %d claims already predicted", system.name, resumed, len(claims))
    timing_path = pred_dir / f"{system.name}.timing.json"
    timing = json.loads(timing_path.read_text(encoding="utf-8")) if timing_path.is_file() else {}
    bar = tqdm(total=len(claims), initial=resumed, desc=system.name, unit=" claims", disable=not progress)
    started = time.perf_counter()
    with writer:
        for result in pipe.iter_results(todo, batch_size=batch_size):
            writer.write(prediction_record(result, pipe.dataset, pipe.store))
            bar.update(1)
    bar.close()
    if todo:
        seconds = time.perf_counter() - started
        write_json_atomic(
            timing_path,
            {
                "seconds": timing.get("seconds", 0.0) + seconds,
                "claims": timing.get("claims", 0) + len(todo),
                "segments": timing.get("segments", 0) + 1,
            },
        )
    if faithfulness and getattr(pipe, "verifier", None) is not None:
        judged = ResumableJsonl(pred_dir / f"{system.name}.faithful.jsonl")
        pending = [r for r in writer.records if not judged.is_done(r["id"])]
        with judged:
            for i in range(0, len(pending), batch_size):
                for row in _judge_faithfulness(pipe, pending[i : i + batch_size]):
                    judged.write(row)
    return len(todo), resumed


def compare(
    configs: Sequence[str | Path],
    claims_file: str | Path | None = None,
    dataset: str | None = None,
    sample: int | None = None,
    seed: int = 13,
    run_id: str | None = None,
    results_dir: str | Path | None = None,
    overrides: Sequence[str] = (),
    progress: bool = True,
    batch_size: int = 32,
    faithfulness: bool = True,
    pipeline_factory: PipelineFactory = default_pipeline,
    pipelines: dict[str, Any] | None = None,
    n_resamples: int = 10_000,
    force_new: bool = False,
) -> CompareOutcome:
    """Run every configuration over the same claims, then score, report and draw figures.

    Args:
        configs: config specs (a file, or files joined by ``+``), baseline first (pairs are
            baseline vs each other system).
        claims_file: claims to use instead of each config's ``data.claims``.
        dataset: dataset name for every config (``data.dataset``).
        sample: draw this many claims stratified by label (all when None).
        seed: sampling and bootstrap seed (recorded in ``run.json``).
        run_id: results sub-directory; default from dataset, system names, sample and seed.
        results_dir: parent directory (default: the first config's ``paths.results_dir``).
        overrides: ``key=value`` overrides applied to every config, ``NAME:key=value`` ones to
            the system named NAME.
        progress: show progress bars.
        batch_size: claims per pipeline batch.
        faithfulness: check each explanation with the system's own verifier.
        pipeline_factory: ``(config, progress) -> pipeline`` with ``build()``, ``iter_results``,
            ``dataset`` and ``store`` (default: ``VerificationPipeline``).
        pipelines: already built pipelines by system name (tests reuse them).
        n_resamples: bootstrap resamples.
        force_new: set aside a run directory's predictions made from other settings, claims,
            corpus or model files and start again, instead of refusing.

    Raises:
        ValueError: fewer than two configs, configs on different datasets or claims, or a
            run directory holding a run with other settings.
    """
    extra = list(overrides)
    if dataset:
        extra.insert(0, f"data.dataset={dataset}")
    if claims_file:
        extra.append(f"data.claims={claims_file}")
    systems = load_systems(configs, extra)
    data = dataset_from_config(systems[0].config.data)
    for s in systems[1:]:
        other = dataset_from_config(s.config.data)
        if (other.name, other.claims_path, other.corpus_path, other.edits) != (
            data.name,
            data.claims_path,
            data.corpus_path,
            data.edits,
        ):
            raise ValueError(
                f"configs {systems[0].source} and {s.source} use different data "
                f"({data.name}: {data.claims_path} vs {other.name}: {other.claims_path}); "
                "compare needs the same"
            )
    policy = ErrorPolicy(skip=systems[0].config.data.skip_bad_lines)
    claims = validate_claims(list(data.claims(policy)), policy, str(data.claims_path))
    if sample:
        claims = stratified_sample(claims, sample, seed)
    run_id = run_id or default_run_id(data.name, systems, sample, seed)
    root = Path(results_dir or systems[0].config.paths.results_dir)
    run_dir = output_dir(root / run_id, "--run-id")
    with run_lock(run_dir):
        identity = {
            "dataset": {
                "name": data.name,
                "claims": str(data.claims_path),
                "corpus": str(data.corpus_path),
                "claims_sha256": file_sha256(data.claims_path),
                **(
                    {"corpus_edits": corpus_fingerprint(data, systems[0].config.paths.cache_dir)}
                    if data.edits
                    else {}
                ),
            },
            "sample": sample,
            "seed": seed,
            "claim_ids": [c.id for c in claims],
            "systems": [
                {
                    "name": s.name,
                    "source": s.source,
                    "config_hash": run_config_hash(s.config, two_way=data.two_way),
                }
                for s in systems
            ],
        }
        _check_identity(run_dir, identity, force_new)
        for s in systems:
            write_text_atomic(
                run_dir / "configs" / f"{s.name}.yaml", yaml.safe_dump(s.config.to_dict(), sort_keys=False)
            )
        env = environment() | {
            "dataset": identity["dataset"],
            "skipped_claims": dict(policy.counts),
            "skipped_examples": policy.examples,
            "models": {},
        }
        written, resumed = {}, {}
        before = read_env(run_dir).get("models", {})
        pipelines = dict(pipelines or {})
        memories = PairMemories()  # the systems answer each other's NLI pairs where they read alike
        for s in systems:
            pipe = pipelines.get(s.name)
            if (
                pipe is None
                and s.name in before
                and _complete(run_dir / "predictions", s.name, claims, faithfulness)
            ):
                env["models"][s.name] = before[s.name]  # nothing left to run: no model is loaded
                written[s.name], resumed[s.name] = 0, len(claims)
                continue
            if pipe is None:  # given pipelines are built already
                pipe = pipeline_factory(s.config, progress)
                build_with_pair_memories(pipe, memories)
            env["models"][s.name] = _model_hashes(pipe)
            _check_models(run_dir, s.name, before.get(s.name), env["models"][s.name], force_new)
            write_json_atomic(env_path(run_dir), env)
            written[s.name], resumed[s.name] = _predict_system(
                s, pipe, claims, run_dir / "predictions", batch_size, progress, faithfulness
            )
            pipelines[s.name] = pipe
        write_json_atomic(env_path(run_dir), env)
        metrics, configs = _score(run_dir, n_resamples)
        export_subgraphs(run_dir, pipelines, claims, metrics)  # before the figures, which draw them
        _publish(run_dir, metrics, configs)
        return CompareOutcome(run_dir, written, resumed, metrics)


def _subgraph_fn(pipe: Any) -> Callable[[str], dict] | None:
    if callable(getattr(pipe, "subgraph", None)):
        return pipe.subgraph
    for retriever in getattr(getattr(pipe, "retrieval", None), "retrievers", {}).values():
        if callable(getattr(retriever, "subgraph", None)):
            return retriever.subgraph
    return None


FIGURE_GRAPHS = 4  # evidence-graph figures per system
FIGURE_CANDIDATES = 60  # claims whose subgraph is computed while looking for ones with edges


def figure_candidates(claims: Sequence[Claim], metrics: dict, system: str) -> list[Claim]:
    """Claims to draw for ``system``, best first: the report's worked examples, then the claims
    only ``system`` got strictly right, then the rest in claim order."""
    by_key = {json.dumps(c.id): c for c in claims}
    keys = [json.dumps(ex["id"]) for ex in metrics.get("examples", [])]
    for pair in metrics.get("paired", []):
        side = "only_b" if pair.get("b") == system else "only_a" if pair.get("a") == system else None
        if side:
            keys += [json.dumps(i) for i in pair.get("only_one_right", {}).get(side, [])]
    keys += list(by_key)
    return [by_key[k] for k in dict.fromkeys(keys) if k in by_key]


def export_subgraphs(run_dir: Path, pipelines: dict[str, Any], claims: Sequence[Claim], metrics: dict) -> int:
    """Save ``subgraphs/<system>/<claim id>.json`` for every system whose pipeline (or one of its
    retrievers) has ``subgraph(claim_text) -> dict``; returns how many were written.

    Up to :data:`FIGURE_GRAPHS` claims per system, taken from :func:`figure_candidates` and
    preferring subgraphs with at least one edge (a claim whose entities have no path between them
    draws as bare nodes); the first :data:`FIGURE_CANDIDATES` candidates are tried.  Subgraphs
    saved by an earlier run are kept, so a resumed run draws the same claims."""
    written = 0
    for name, pipe in pipelines.items():
        fn = _subgraph_fn(pipe)
        if fn is None:
            continue
        out = run_dir / "subgraphs" / name
        if out.is_dir() and any(out.glob("*.json")):
            continue
        with_edges: list[tuple[Claim, dict]] = []
        without: list[tuple[Claim, dict]] = []
        for c in figure_candidates(claims, metrics, name)[:FIGURE_CANDIDATES]:
            graph = dict(fn(c.text))
            graph.setdefault("claim", c.text)
            (with_edges if graph.get("edges") else without).append((c, graph))
            if len(with_edges) >= FIGURE_GRAPHS:
                break
        for c, graph in (with_edges + without)[:FIGURE_GRAPHS]:
            write_json_atomic(out / f"{c.id}.json", graph)
            written += 1
    return written


def resolve_run_dir(run: str | Path, results_dir: str | Path = "results") -> Path:
    """A run id under ``results_dir``, or a path to a run directory."""
    p = Path(run)
    if (p / "run.json").is_file():
        return p
    q = Path(results_dir) / str(run)
    if (q / "run.json").is_file():
        return q
    raise FileNotFoundError(f"no run {run!r}: neither {p} nor {q} holds a run.json")


def rescore(run: str | Path, results_dir: str | Path = "results", n_resamples: int = 10_000) -> dict:
    """Score a run's saved predictions (no model runs); write metrics, report and figures."""
    run_dir = resolve_run_dir(run, results_dir)
    metrics, configs = _score(run_dir, n_resamples)
    _publish(run_dir, metrics, configs)
    return metrics


def _score(run_dir: Path, n_resamples: int) -> tuple[dict, dict[str, Config]]:
    """Metrics of a run directory's saved predictions, and the systems' configs."""
    from eval.compare_metrics import score_run

    identity = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    configs = {s["name"]: load_config(run_dir / "configs" / f"{s['name']}.yaml") for s in identity["systems"]}
    data = dataset_from_config(next(iter(configs.values())).data)
    wanted = {json.dumps(i) for i in identity["claim_ids"]}
    gold = [c for c in data.claims(ErrorPolicy(skip=True)) if json.dumps(c.id) in wanted]
    env = read_env(run_dir)
    metrics = score_run(run_dir, identity, data, gold, configs, n_resamples=n_resamples, env=env)
    cpu = _recorded_cpu(env)
    if cpu:
        metrics["cpu"] = cpu  # the timings' machine, not the one re-scoring them
    return metrics, configs


def _recorded_cpu(env: dict) -> dict | None:
    """The CPU ``env.json`` recorded (the last ``garag compare`` of the run); None where it has
    none (a run written before garag recorded it)."""
    machine = env.get("machine")
    cpu = machine.get("cpu") if isinstance(machine, dict) else None
    return cpu if isinstance(cpu, dict) else None


def _publish(run_dir: Path, metrics: dict, configs: dict[str, Config]) -> None:
    """Write metrics.json, metrics.csv, the figures and report.md."""
    from eval.compare_metrics import metrics_csv
    from eval.figures import draw_all
    from eval.report import write_report

    write_json_atomic(run_dir / "metrics.json", metrics)
    write_text_atomic(run_dir / "metrics.csv", metrics_csv(metrics))
    figures = draw_all(run_dir, metrics, configs)
    write_report(run_dir, metrics, configs, figures)
