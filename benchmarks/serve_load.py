"""Load test of ``garag serve`` on 127.0.0.1 (issue 21's goals), bounded in requests and time.

Starts ``garag serve`` with the NLI configs on a free loopback port, then per config sends
``--requests`` single-claim ``POST /v1/verify`` requests at each concurrency (a fresh slice of the
dataset's claims per level, so no level reads another's caches), records latency percentiles,
throughput and errors, then sends ``--rss-requests`` more to the first config and reports the
server's RSS growth over them.  Last, with the server stopped, it runs the same configs in
process over the claims of the highest concurrency level with ``VerificationPipeline.iter_results``
in batches of ``--batch`` (what ``garag predict`` does) for the batch claims/s.  That run comes
after the served one, so it finds the disk caches warm: the comparison is conservative.

Goals: zero errors; p95 < 1 s at concurrency 8 for the baseline config; throughput at 32 >= 80% of
batch claims/s; RSS growth < 10% over 2,000 requests.  Writes ``benchmarks/results/serve_load.{json,md}``.

The flood (``--flood``, 500 by default; issue 53): that many ``POST /v1/verify`` requests sent at once
to the first config, each on its own connection, while ``/v1/health`` is asked every 100 ms and the
server's RSS is read every 250 ms.  Goals: the requests the queue cannot hold get 429 with
``Retry-After``, none gets a 5xx or a dropped connection, ``/v1/health`` answers every time, and RSS
stays within 10% of where it started.  ``--only-flood`` runs the flood alone (writes
``serve_flood.{json,md}``).

    python benchmarks/serve_load.py --cache cache [--configs configs/baseline.yaml configs/graph.yaml]
    python benchmarks/serve_load.py --cache cache --only-flood
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from app.serve.launch import ServeDidNotStart, start_serve
from eval.run_env import machine, machine_line
from garag.config import load_config
from garag.datasets import dataset_from_config
from pipeline.verification import VerificationPipeline

ROOT = Path(__file__).resolve().parents[1]
WARMUP = 64  # requests before the flood, so that its RSS starts from a server that has verified
FLOODS = 2  # the same flood again: RSS bounded means the second takes it no higher than the first
OUT = ROOT / "benchmarks" / "results"


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


async def load(url: str, config: str, claims: list[str], concurrency: int, deadline: float) -> dict:
    """Send every claim once with at most ``concurrency`` requests in flight."""
    sem = asyncio.Semaphore(concurrency)
    latencies: list[float] = []
    errors: dict[str, int] = {}
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)

    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:

        async def one(claim: str) -> None:
            async with sem:
                if time.monotonic() > deadline:
                    errors["skipped (time bound)"] = errors.get("skipped (time bound)", 0) + 1
                    return
                t = time.perf_counter()
                try:
                    r = await client.post("/v1/verify", json={"claim": claim, "config": config})
                    ok = r.status_code == 200 and r.json().get("claim") == claim
                    key = None if ok else f"HTTP {r.status_code}"
                except httpx.HTTPError as e:
                    key = type(e).__name__
                latencies.append(time.perf_counter() - t)
                if key:
                    errors[key] = errors.get(key, 0) + 1

        started = time.perf_counter()
        await asyncio.gather(*(one(c) for c in claims))
        wall = time.perf_counter() - started
    return {
        "config": config,
        "concurrency": concurrency,
        "requests": len(claims),
        "errors": sum(errors.values()),
        "error_kinds": errors,
        "seconds": round(wall, 2),
        "throughput": round(len(latencies) / wall, 2),
        "p50": round(percentile(latencies, 0.50), 3),
        "p95": round(percentile(latencies, 0.95), 3),
        "p99": round(percentile(latencies, 0.99), 3),
        "mean": round(statistics.fmean(latencies), 3),
    }


async def flood(url: str, config: str, claims: list[str], pid: int) -> dict:
    """Send every claim at once (one connection each) while asking /v1/health and reading RSS."""
    statuses: dict[str, int] = {}
    retry_after: list[int] = []
    health: list[float] = []
    health_failures: dict[str, int] = {}  # what a failed check got: its status code or httpx error
    rss = [rss_mb(pid)]
    done = asyncio.Event()
    limits = httpx.Limits(max_connections=len(claims) + 8, max_keepalive_connections=len(claims) + 8)

    async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits) as client:

        async def one(claim: str) -> None:
            try:
                r = await client.post("/v1/verify", json={"claim": claim, "config": config})
                key = str(r.status_code)
                if r.status_code == 429:
                    retry_after.append(int(r.headers.get("retry-after", "-1")))
            except httpx.HTTPError as e:
                key = type(e).__name__
            statuses[key] = statuses.get(key, 0) + 1

        async def watch() -> None:
            async with httpx.AsyncClient(base_url=url, timeout=5) as probe:
                while not done.is_set():
                    t = time.perf_counter()
                    try:
                        code = (await probe.get("/v1/health")).status_code
                        failure = None if code == 200 else str(code)
                    except httpx.HTTPError as e:
                        failure = type(e).__name__
                    if failure is None:
                        health.append(time.perf_counter() - t)
                    else:
                        health_failures[failure] = health_failures.get(failure, 0) + 1
                    rss.append(rss_mb(pid))
                    await asyncio.sleep(0.1)

        watcher = asyncio.create_task(watch())
        started = time.perf_counter()
        await asyncio.gather(*(one(c) for c in claims))
        wall = time.perf_counter() - started
        done.set()
        await watcher
    rss.append(rss_mb(pid))
    server_errors = sum(n for k, n in statuses.items() if not k.isdigit() or int(k) >= 500)
    return {
        "config": config,
        "requests": len(claims),
        "statuses": dict(sorted(statuses.items())),
        "server_errors_or_dropped": server_errors,
        "retry_after_s": sorted(set(retry_after)),
        "seconds": round(wall, 2),
        "health_checks": len(health) + sum(health_failures.values()),
        "health_failed": sum(health_failures.values()),
        "health_failures": dict(sorted(health_failures.items())),
        "health_p50": round(percentile(health, 0.50), 4) if health else None,
        "health_max": round(max(health), 4) if health else None,
        "rss_start_mb": round(rss[0], 1),
        "rss_peak_mb": round(max(rss), 1),
        "rss_growth": round((max(rss) - rss[0]) / rss[0], 4),
    }


def flood_goals(f: dict) -> dict:
    runs = f["runs"]
    return {
        "some_429": all(r["statuses"].get("429", 0) > 0 for r in runs),
        "no_5xx_or_dropped": all(r["server_errors_or_dropped"] == 0 for r in runs),
        "health_answered_throughout": all(r["health_failed"] == 0 and r["health_checks"] > 0 for r in runs),
        # bounded: a second flood takes the server no higher than the first (within 10%)
        "rss_bounded": runs[-1]["rss_peak_mb"] <= 1.10 * runs[0]["rss_peak_mb"],
    }


def flood_markdown(r: dict) -> str:
    lines = [
        "# garag serve under a flood (benchmarks/serve_load.py --only-flood)",
        "",
        f"`{r['command']}`; {machine_line(r['machine'])}; "
        f"{r['dataset']} claims, server `--micro-batch {r['server']['micro_batch']} --max-queue "
        f"{r['server']['max_queue']}`. Requests and server on 127.0.0.1. After "
        f"{r['flood']['warmup_requests']} warm-up requests (concurrency 8), the same flood twice.",
        "",
    ]
    for i, f in enumerate(r["flood"]["runs"], 1):
        lines += flood_run_markdown(i, f)
    return "\n".join([*lines, "Goals: " + json.dumps(r["goals"]), ""])


def _failure_kinds(kinds: dict[str, int] | None) -> str:
    """What a flood's failed health checks got, as " (ReadTimeout 1)"; "" where none failed or the
    result was written before their kinds were kept."""
    return f" ({', '.join(f'{k} {n}' for k, n in kinds.items())})" if kinds else ""


def flood_run_markdown(i: int, f: dict) -> list[str]:
    return [
        f"Flood {i}: {f['requests']} `POST /v1/verify` requests to `{f['config']}` sent at once, each on its "
        f"own connection, answered in {f['seconds']} s with statuses {json.dumps(f['statuses'])} "
        f"(Retry-After values {f['retry_after_s']} s); {f['server_errors_or_dropped']} 5xx or dropped "
        f"connections. `/v1/health` meanwhile: {f['health_checks']} checks, {f['health_failed']} failed"
        f"{_failure_kinds(f.get('health_failures'))}, "
        f"p50 {f['health_p50']} s, max {f['health_max']} s. Server RSS {f['rss_start_mb']} MB at the "
        f"start, peak {f['rss_peak_mb']} MB.",
        "",
    ]


def batch_rate(path: str, overrides: list[str], claims: list, batch: int) -> dict:
    pipe = VerificationPipeline(load_config(path, overrides), progress=False).build()
    t = time.perf_counter()
    n = sum(1 for _ in pipe.iter_results(claims, batch_size=batch))
    wall = time.perf_counter() - t
    return {"claims": n, "seconds": round(wall, 2), "claims_per_s": round(n / wall, 2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", nargs="+", default=["configs/baseline.yaml", "configs/graph.yaml"])
    ap.add_argument("--cache", default="cache")
    ap.add_argument("--dataset", default="fever")
    ap.add_argument("--requests", type=int, default=500)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--rss-requests", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=32, help="claims per batch in process (garag predict's)")
    ap.add_argument("--micro-batch", type=int, default=32, help="the server's --micro-batch")
    ap.add_argument("--max-seconds", type=float, default=3600, help="bound on the whole load test")
    ap.add_argument("--flood", type=int, default=500, help="requests sent at once in the flood (0: none)")
    ap.add_argument("--max-queue", type=int, default=256, help="the server's --max-queue")
    ap.add_argument("--only-flood", action="store_true", help="run the flood alone (serve_flood.{json,md})")
    ap.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
        help="a config override for the server and the in-process runs (repeatable)",
    )  # fmt: skip
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    overrides = [f"data.dataset={args.dataset}", f"paths.cache_dir={args.cache}", *args.overrides]
    names = [Path(c).stem for c in args.configs]
    dataset = dataset_from_config(load_config(args.configs[0], overrides).data)
    all_claims = list(dataset.claims())
    levels = len(args.concurrency)
    if not args.only_flood and len(all_claims) < args.requests * levels:
        raise SystemExit(f"{len(all_claims)} claims: fewer than {args.requests} x {levels} levels")
    slices = {
        c: all_claims[i * args.requests : (i + 1) * args.requests] for i, c in enumerate(args.concurrency)
    }

    serve_args = ["--configs", *args.configs, "--micro-batch", str(args.micro_batch), "--max-batch", "64",
                  "--max-queue", str(args.max_queue),
                  *sum((["--set", o] for o in overrides), [])]  # fmt: skip
    log = Path(tempfile.gettempdir()) / f"garag-serve-load-{os.getpid()}.log"
    deadline = time.monotonic() + args.max_seconds
    t0 = time.perf_counter()
    try:  # in its own process group: stopped below with the workers it starts
        server, url = start_serve(
            serve_args, log, seconds=args.max_seconds, poll=1.0, new_session=True, cwd=ROOT
        )
    except ServeDidNotStart as e:
        raise SystemExit(str(e)) from None
    load_seconds = time.perf_counter() - t0
    rows, rss, flooded = [], {}, None
    try:
        if args.flood:
            warm = [c.text for c in all_claims[:WARMUP]]
            asyncio.run(load(url, names[0], warm, 8, deadline))
            texts = [all_claims[-1 - i % len(all_claims)].text for i in range(args.flood)]
            runs = []
            for _ in range(FLOODS):
                runs.append(asyncio.run(flood(url, names[0], texts, server.pid)))
                print(json.dumps({"flood": runs[-1]}), flush=True)
            flooded = {"warmup_requests": len(warm), "runs": runs}
        if args.only_flood:
            return write_flood(args, argv, flooded, load_seconds)
        for name in names:
            for c in args.concurrency:
                row = asyncio.run(load(url, name, [x.text for x in slices[c]], c, deadline))
                rows.append(row)
                print(json.dumps(row), flush=True)
        rss_claims = [all_claims[i % len(all_claims)].text for i in range(args.rss_requests)]
        rss["before_mb"] = round(rss_mb(server.pid), 1)
        rss_row = asyncio.run(load(url, names[0], rss_claims, 8, deadline))
        rss["after_mb"] = round(rss_mb(server.pid), 1)
        rss["requests"] = rss_row["requests"]
        rss["errors"] = rss_row["errors"]
        rss["growth"] = round((rss["after_mb"] - rss["before_mb"]) / rss["before_mb"], 4)
        print(json.dumps({"rss": rss}), flush=True)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)
    top = max(args.concurrency)
    batch = {}
    for path, name in zip(args.configs, names, strict=True):
        batch[name] = batch_rate(path, overrides, slices[top], args.batch)
        print(json.dumps({"batch": name, **batch[name]}), flush=True)
    goals = {
        "zero_errors": all(r["errors"] == 0 for r in rows) and rss["errors"] == 0,
        "p95_at_8_baseline_under_1s": next(
            (r["p95"] < 1.0 for r in rows if r["config"] == names[0] and r["concurrency"] == 8), None
        ),
        "throughput_at_32_vs_batch": {
            n: round(
                next(r["throughput"] for r in rows if r["config"] == n and r["concurrency"] == top)
                / batch[n]["claims_per_s"],
                3,
            )
            for n in names
        },  # fmt: skip
        "rss_growth_under_10pct": rss["growth"] < 0.10,
        **({"flood": flood_goals(flooded)} if flooded else {}),
    }
    result = {
        "machine": machine(),
        "dataset": args.dataset,
        "server": server_info(args, load_seconds),
        "rows": rows,
        "rss": rss,
        "batch": batch,
        "flood": flooded,
        "goals": goals,
        "command": "python benchmarks/serve_load.py " + " ".join(argv if argv is not None else sys.argv[1:]),
    }
    return write_result(args.out, "serve_load", result, markdown(result))


def write_result(out: Path, stem: str, result: dict, text: str) -> int:
    """``<out>/<stem>.json`` and ``.md``; the markdown printed."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (out / f"{stem}.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


def server_info(args: argparse.Namespace, load_seconds: float) -> dict:
    load = round(load_seconds, 1)
    return {"micro_batch": args.micro_batch, "max_queue": args.max_queue, "load_seconds": load}


def write_flood(
    args: argparse.Namespace, argv: list[str] | None, flooded: dict | None, load_seconds: float
) -> int:
    if flooded is None:
        raise SystemExit("--only-flood needs --flood N > 0")
    result = {
        "machine": machine(),
        "dataset": args.dataset,
        "server": server_info(args, load_seconds),
        "flood": flooded,
        "goals": flood_goals(flooded),
        "command": "python benchmarks/serve_load.py " + " ".join(argv if argv is not None else sys.argv[1:]),
    }
    return write_result(args.out, "serve_flood", result, flood_markdown(result))


def markdown(r: dict) -> str:
    lines = [
        "# garag serve under load (benchmarks/serve_load.py)",
        "",
        f"`{r['command']}`; {machine_line(r['machine'])}; "
        f"{r['dataset']} claims, server `--micro-batch {r['server']['micro_batch']}`, "
        f"models loaded in {r['server']['load_seconds']} s. Requests and server on 127.0.0.1.",
        "",
        "| config | concurrency | requests | errors | claims/s | p50 s | p95 s | p99 s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for x in r["rows"]:
        lines.append(
            f"| {x['config']} | {x['concurrency']} | {x['requests']} | {x['errors']} | {x['throughput']} | "
            f"{x['p50']} | {x['p95']} | {x['p99']} |"
        )
    lines += ["", "| config | batch claims/s (in process) | served claims/s at the top concurrency / batch |",
              "|---|---|---|"]  # fmt: skip
    for n, b in r["batch"].items():
        lines.append(f"| {n} | {b['claims_per_s']} | {r['goals']['throughput_at_32_vs_batch'][n]} |")
    s = r["rss"]
    lines += [
        "",
        f"RSS over {s['requests']} more requests (concurrency 8): {s['before_mb']} MB -> {s['after_mb']} MB "
        f"({100 * s['growth']:+.1f}%), {s['errors']} errors.",
        "",
        "Goals: " + json.dumps(r["goals"]),
        "",
    ]
    if r.get("flood"):
        lines += flood_markdown(r).splitlines()[2:]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
