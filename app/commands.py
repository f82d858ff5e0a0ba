"""The commands behind ``garag <command>``: each parses nothing and calls one stage entry point.

This is the application layer: it may import every package below it (eval,
pipeline, verifier, retrievers, garag's core) and nothing imports it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

from garag.config import (
    Config,
    check_override_scopes,
    config_name,
    load_config_with_sources,
    render_config,
    scoped_overrides,
    validate_config,
)


def config_overrides(args: argparse.Namespace) -> list[str]:
    """The ``--set`` overrides of a command, with ``--dataset NAME`` as the first of them."""
    overrides = list(args.overrides)
    if getattr(args, "dataset", None):
        overrides.insert(0, f"data.dataset={args.dataset}")
    if getattr(args, "part", None):
        overrides.append(f"data.part={args.part}")
    return overrides


def own_overrides(args: argparse.Namespace) -> list[str]:
    """:func:`config_overrides` for the command's own ``--config``: ``NAME:key=value`` ones where NAME
    is its name (:func:`garag.config.config_name`; another NAME, or any without ``--config``, is an
    error); ``compare`` and ``serve`` give them to their configs."""
    overrides = config_overrides(args)
    if hasattr(args, "configs"):  # compare and serve: the NAME: ones belong to their configs
        return scoped_overrides("", overrides)
    names = [config_name(args.config)] if args.config else []
    check_override_scopes(names, overrides)  # a NAME: override naming no config is refused, not dropped
    return scoped_overrides(names[0] if names else "", overrides)


def with_edit_flags(config: Config, args: argparse.Namespace) -> Config:
    """``config`` with the files of ``--add`` / ``--remove`` after its ``data.add_pages`` /
    ``data.remove_pages``."""
    add, remove = getattr(args, "add_pages", []), getattr(args, "remove_pages", [])
    if not add and not remove:
        return config
    data = config.data.model_copy(
        update={
            "add_pages": [*config.data.add_pages, *add],
            "remove_pages": [*config.data.remove_pages, *remove],
        }
    )
    return validate_config({**config.to_dict(), "data": data.model_dump()})


def cmd_config(args: argparse.Namespace, config: Config) -> int:
    _, sources = load_config_with_sources(args.config, own_overrides(args))
    for key, flag in (("add_pages", "--add"), ("remove_pages", "--remove")):
        if getattr(args, key, None):
            sources[f"data.{key}"] = f"{sources.get(f'data.{key}', 'default')} + {flag}"
    print(render_config(config, sources), end="")
    return 0


def cmd_index(args: argparse.Namespace, config: Config) -> int:
    from pipeline.retrieval import RetrievalPipeline

    engine = None
    if args.engine == "ray":
        from retrievers.graal.ray_engine import RayEngine

        engine = RayEngine(args.ray_workers, args.ray_address)
    elif args.ray_address or args.ray_workers:
        raise ValueError(f"{'--ray-address' if args.ray_address else '--ray-workers'} needs --engine ray")
    try:
        # Ray prints its workers' failures (a lost actor, a retried task) on stdout: to stderr
        # with them, stdout is the artifacts' JSON alone
        with contextlib.redirect_stdout(sys.stderr) if engine is not None else contextlib.nullcontext():
            pipe = RetrievalPipeline(config, progress=not args.no_progress, engine=engine)
            artifacts = pipe.build(force=args.force)
    finally:
        if engine is not None:
            engine.close()
    print(json.dumps({name: str(path) for name, path in artifacts.items()}, indent=2))
    if pipe.dataset.edits:
        print(
            f"garag: corpus {pipe.fingerprint[:16]}: {pipe.store.n_pages} pages, {len(pipe.store)} sentences "
            "after the edits; later commands use it when given the same --add/--remove (or "
            "data.add_pages / data.remove_pages in the config)",
            file=sys.stderr,
        )
    return 0


def claims_to_verify(args: argparse.Namespace) -> list[str]:
    """The claims of ``garag verify``: its arguments, else the non-empty lines of stdin."""
    if args.claims:
        texts = [c.strip() for c in args.claims]
        empty = [i + 1 for i, t in enumerate(texts) if not t]
        if empty:
            raise ValueError(f"claim argument {empty[0]} is empty")
        return texts
    if sys.stdin is None or sys.stdin.isatty():
        raise ValueError('no claim given: garag verify "CLAIM" [...], or claims on stdin, one per line')
    texts = [line.strip() for line in sys.stdin if line.strip()]
    if not texts:
        raise ValueError("stdin: no claim (one per line expected)")
    return texts


def cmd_verify(args: argparse.Namespace, config: Config) -> int:
    from app.api import FactChecker

    texts = claims_to_verify(args)
    checker = FactChecker(config, trained_pipeline(config, progress=not args.no_progress).build())
    for i, verdict in enumerate(checker.verify_many(texts, batch_size=args.batch_size)):
        if args.json:
            print(json.dumps(verdict.to_json(), ensure_ascii=False))
        else:
            print(("\n" if i else "") + str(verdict))
    return 0


def cmd_contrast(args: argparse.Namespace, config: Config) -> int:
    from app.contrast_set import parse_kinds, write_contrast_set

    kinds = parse_kinds(args.kinds)
    out = Path(args.out)
    if out.exists() and not args.force:
        raise ValueError(f"{out} exists (--force overwrites it)")
    report = write_contrast_set(config, out, kinds, args.seed, progress=not args.no_progress)
    corpus = f" --set data.corpus={config.data.corpus}" if config.data.corpus else ""
    report["evaluate"] = (
        f"garag evaluate --dataset {config.data.dataset} --set data.claims={out}{corpus} --config CONFIG"
    )
    print(json.dumps(report, indent=2))
    return 0


def cmd_retrieve(args: argparse.Namespace, config: Config) -> int:
    from pipeline.retrieval_report import retrieval_report

    out = retrieval_report(config, args.claim, args.k, args.retriever, progress=not args.no_progress)
    print(json.dumps(out, indent=2, ensure_ascii=False))
    return 0


def cmd_subgraph(args: argparse.Namespace, config: Config) -> int:
    from garag.artifacts import write_json_atomic
    from pipeline.retrieval import RetrievalPipeline

    if not args.claim.strip():
        raise ValueError("the claim is empty")
    if "graal" not in config.retrieval.retrievers:
        config.retrieval.retrievers = [*config.retrieval.retrievers, "graal"]
    pipe = RetrievalPipeline(config, progress=not args.no_progress)
    pipe.build()
    sub = pipe.retrievers["graal"].subgraph(args.claim, max_edges=args.max_edges)  # type: ignore[attr-defined]
    if args.out:
        write_json_atomic(args.out, sub)
        print(f"written: {args.out}")
    else:
        print(json.dumps(sub, indent=2, ensure_ascii=False))
    return 0


def cmd_evaluate_retrieval(args: argparse.Namespace, config: Config) -> int:
    from eval.retrieval_eval import evaluate_retrieval

    report = evaluate_retrieval(config, out_dir=args.out, progress=not args.no_progress)
    print(report.table_markdown)
    print(f"\nwritten: {report.out_dir}")
    return 0


def _run_dir(args: argparse.Namespace, config: Config) -> Path:
    if args.out:
        return Path(args.out)
    part = "" if config.data.part == "all" else f"-{config.data.part}"
    name = f"{config.data.dataset}{part}-baseline" + ("-oracle" if args.oracle else "")
    return Path(config.paths.results_dir) / name


def ensure_trained(config: Config, progress: bool = True) -> None:
    """The explicit training step of the commands that verify: train the verifiers ``config`` loads
    where they are not trained yet (building a pipeline never trains)."""
    from training.verifier import ensure_verifiers

    ensure_verifiers(config, progress=progress)


def trained_pipeline(config: Config, progress: bool) -> Any:
    """``config``'s pipeline (unbuilt), after :func:`ensure_trained`."""
    from pipeline.verification import VerificationPipeline

    ensure_trained(config, progress)
    return VerificationPipeline(config, progress=progress)


def cmd_train_verifier(args: argparse.Namespace, config: Config) -> int:
    from garag.artifacts import read_meta
    from training.verifier import ensure_verifier
    from verifier.claim_aggregator import read_aggregator
    from verifier.trained import mix_verifier_config, verifier_artifact_dir

    mixes = bool(config.verifier.mix_train)  # verifier.mix_weight's second verifier, trained here too
    if config.verifier.model and not mixes:
        raise ValueError("verifier.model is set: garag trains its own verifier only when it is empty")
    todo = [] if config.verifier.model else [("model", config)]
    if mixes:
        todo.append(("mix_model", mix_verifier_config(config)))
    report = {}
    for key, cfg in todo:
        model = ensure_verifier(cfg, progress=not args.no_progress, force=args.force)
        meta = read_meta(verifier_artifact_dir(cfg)) or {}
        aggregator = read_aggregator(model)
        report[key] = {
            "model": model,
            "best_val": meta.get("best_val"),
            "calibration": meta.get("calibration"),
            "claim_aggregator": aggregator.info if aggregator is not None else None,
            "train_seconds": meta.get("train_seconds"),
            "data": meta.get("data"),
        }
    print(json.dumps(report["model"] if list(report) == ["model"] else report, indent=2))
    return 0


def cmd_predict(args: argparse.Namespace, config: Config) -> int:
    from eval.verification_eval import run_predictions

    out = _run_dir(args, config)
    outcome = run_predictions(
        config,
        out,
        oracle=args.oracle,
        progress=not args.no_progress,
        force_new=args.force_new,
        pipeline_factory=trained_pipeline,
    )
    print(
        json.dumps(
            {
                "predictions": str(outcome.predictions),
                "written": outcome.written,
                "resumed": outcome.resumed,
                "skipped": outcome.skipped,
                "claims_per_second": round(outcome.claims_per_second, 2),
                **({"llm": outcome.llm} if outcome.llm is not None else {}),
            },
            indent=2,
        )
    )
    return 0


def cmd_compare(args: argparse.Namespace, config: Config) -> int:
    from eval.compare import compare
    from eval.report import headline_table, significance_table

    outcome = compare(
        args.configs,
        claims_file=args.claims,
        dataset=args.dataset,
        sample=args.sample,
        seed=args.seed,
        run_id=args.run_id,
        # None: the first compared config's paths.results_dir (with --set applied), not the default's
        results_dir=None,
        overrides=config_overrides(args) if args.part else args.overrides,
        progress=not args.no_progress,
        batch_size=args.batch_size,
        faithfulness=not args.no_faithfulness,
        force_new=args.force_new,
        pipeline_factory=trained_pipeline,
    )
    print(headline_table(outcome.metrics))
    print(significance_table(outcome.metrics))
    print(json.dumps({"written": outcome.written, "resumed": outcome.resumed}))
    print(f"report: {outcome.run_dir / 'report.md'}")
    return 0


def cmd_rescore(args: argparse.Namespace, config: Config) -> int:
    from eval.compare import rescore, resolve_run_dir
    from eval.report import headline_table, significance_table

    run_dir = resolve_run_dir(args.run, config.paths.results_dir)
    metrics = rescore(run_dir)
    print(headline_table(metrics))
    print(significance_table(metrics))
    print(f"report: {run_dir / 'report.md'}")
    return 0


def cmd_evaluate(args: argparse.Namespace, config: Config) -> int:
    if args.run:
        return cmd_rescore(args, config)
    from eval.verification_eval import evaluate

    predictions = Path(args.predictions) if args.predictions else None
    outcome = evaluate(
        config,
        _run_dir(args, config),
        predictions,
        oracle=args.oracle,
        progress=not args.no_progress,
        force_new=args.force_new,
        pipeline_factory=trained_pipeline,
    )
    if outcome.skipped:
        print(f"skipped: {outcome.skipped}", file=sys.stderr)
    print(outcome.table)
    print(f"written: {outcome.out_dir}")
    return 0


def cmd_llm_model(args: argparse.Namespace, config: Config) -> int:
    from garag.llm.models import resolve_model_file

    if config.llm.backend != "llama_cpp":
        raise ValueError(f"llm-model needs llm.backend=llama_cpp (configured: {config.llm.backend!r})")
    mf = resolve_model_file(config.llm.model, config.paths.cache_dir)
    out = {"model": mf.name, "path": str(mf.path), "sha256": mf.sha256, "bytes": mf.size}
    print(json.dumps(out, indent=2))
    return 0


def cmd_split(args: argparse.Namespace, config: Config) -> int:
    from garag.datasets import get_dataset
    from garag.errors import ErrorPolicy
    from garag.splits import write_split

    d = config.data
    dataset = get_dataset(d.dataset, d.claims, d.corpus, d.claim_format, "all", d.split)
    out = Path(args.out) if args.out else dataset.default_split_path()
    if out.exists() and not args.force:
        raise ValueError(f"{out} exists: a split is made once (--force overwrites it)")
    claims = list(dataset.claims(ErrorPolicy(skip=d.skip_bad_lines)))
    doc = write_split(out, dataset.name, dataset.claims_path, claims, args.tune_fraction, args.seed)
    print(json.dumps({"split": str(out), "groups": doc["groups"], **doc["counts"]}))
    return 0


def serve_hosts(bind: str, extra: list[str]) -> tuple[str, ...]:
    """The Host names the server answers: the loopback ones, the bind address unless it is a wildcard
    (0.0.0.0, ::), and ``--allowed-host``."""
    from app.serve.service import LOOPBACK_HOSTS

    names = [*LOOPBACK_HOSTS, *([] if bind in ("0.0.0.0", "::", "") else [bind]), *extra]
    return tuple(dict.fromkeys(n.strip().strip("[]").lower() for n in names if n.strip()))


def cmd_serve(args: argparse.Namespace, config: Config) -> int:
    import ipaddress
    import os

    try:
        import uvicorn

        from app.serve.app import create_app
        from app.serve.service import ServeSettings, Service, load_configs
    except ImportError as e:
        raise ValueError(f"garag serve needs the serve extra (pip install 'garag[serve]'): {e}") from None
    key = os.environ.get("GARAG_API_KEY") or None
    try:
        loopback = args.host == "localhost" or ipaddress.ip_address(args.host).is_loopback
    except ValueError:
        loopback = False
    if not loopback and not key:
        raise ValueError(
            f"--host {args.host} is not a loopback address: set GARAG_API_KEY (sent as X-API-Key)"
        )
    if not 0 < args.port < 65536:
        raise ValueError(f"--port must be in 1..65535, got {args.port}")
    if args.timeout <= 0 or args.keep_alive <= 0 or args.max_wait_ms < 0:
        raise ValueError("--timeout and --keep-alive must be > 0 and --max-wait-ms >= 0")
    settings = ServeSettings(
        max_batch=args.max_batch,
        micro_batch=args.micro_batch,
        max_queue=args.max_queue,
        max_wait=args.max_wait_ms / 1000,
        max_body=args.max_body,
        timeout=args.timeout,
        api_key=key,
        allowed_hosts=serve_hosts(args.host, args.allowed_hosts),
        results_dir=Path(args.results_dir or config.paths.results_dir),
        max_upload=args.max_upload,
        state_dir=Path(args.state_dir) if args.state_dir else None,
        history=not args.no_history,
    )
    configs = load_configs(args.configs, args.overrides)
    for _, served in configs.values():
        ensure_trained(served)
    service = Service(configs, settings).start()
    print(
        f"garag serve: http://{args.host}:{args.port}/ (API docs at /docs); "
        f"loading {', '.join(service.served)}"
    )
    uvicorn.run(
        create_app(service), host=args.host, port=args.port, log_level="warning",
        timeout_keep_alive=args.keep_alive,
    )  # fmt: skip
    return 0


COMMANDS = {
    "config": cmd_config,
    "llm-model": cmd_llm_model,
    "index": cmd_index,
    "retrieve": cmd_retrieve,
    "verify": cmd_verify,
    "contrast": cmd_contrast,
    "subgraph": cmd_subgraph,
    "evaluate-retrieval": cmd_evaluate_retrieval,
    "train-verifier": cmd_train_verifier,
    "predict": cmd_predict,
    "evaluate": cmd_evaluate,
    "compare": cmd_compare,
    "split": cmd_split,
    "serve": cmd_serve,
}
