"""Where an LLM verdict's seconds go: reading the prompt, generating, the JSON-schema grammar.

Runs the real verdict prompt (``prompts/verdict.yaml``) on the local llama.cpp model with
claims of the shape ``make run-llm`` sends (5 numbered sentences with 2 triplet lines each,
~1,000 prompt tokens).  Each claim is sent four times, alternating grammar-constrained and free
generation: the first call reads everything after the prefix llama.cpp keeps from the previous
call (the fixed system text and examples), the repeats find the whole prompt in the KV cache and
time generation alone.  Run it with nothing else on the machine.
Results: ``benchmarks/results/llm/verdict_speed.{json,md}``.

    python benchmarks/llm_verdict_speed.py [--model qwen2.5-coder-1.5b] [--threads 2] [--cache cache]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from garag.llm.models import resolve_model_file
from prompts import load_prompt
from verifier.llm import VerdictReply

OUT = Path(__file__).resolve().parent / "results" / "llm"


def evidence_block(n: int = 5) -> str:
    """Five FEVER-style evidence lines with two triplet lines each (graph-llm's layout)."""
    lines = []
    for i in range(1, n + 1):
        lines.append(
            f"[{i}] Example{i} (Example{i}, {i}): The town of Example{i} lies on the river and was founded"
            f" in 18{10 + i} by settlers from the north , who built a mill there ."
        )
        lines.append(f"    - Example{i} | founded in | 18{10 + i}")
        lines.append("    - settlers | built | mill")
    return "\n".join(lines)


CLAIMS = ["Example1 was founded in 1811.", "Example3 was founded in 1900.", "Example5 has a mill."]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b", help="llm.model: packaged name or .gguf path")
    ap.add_argument("--threads", type=int, default=0, help="llama.cpp threads (0 = all cores)")
    ap.add_argument("--cache", default="cache")
    args = ap.parse_args(argv)
    from llama_cpp import Llama

    mf = resolve_model_file(args.model, args.cache)
    threads = args.threads or (os.cpu_count() or 1)
    llm = Llama(
        model_path=str(mf.path),
        n_ctx=4096,
        seed=13,
        verbose=False,
        n_threads=threads,
        n_threads_batch=threads,
    )
    prompt = load_prompt("verdict")
    schema = VerdictReply.model_json_schema()
    warm = [{"role": m.role, "content": m.content} for m in prompt.render(claim="Warm-up.", evidence="[1] x")]
    llm.create_chat_completion(messages=warm, temperature=0, seed=13, max_tokens=8)  # the fixed prefix

    calls = []
    for claim in CLAIMS:
        msgs = [
            {"role": m.role, "content": m.content}
            for m in prompt.render(claim=claim, evidence=evidence_block())
        ]
        for n, constrained in enumerate((True, False, True, False)):
            extra = {"response_format": {"type": "json_object", "schema": schema}} if constrained else {}
            t = time.perf_counter()
            out = llm.create_chat_completion(messages=msgs, temperature=0, seed=13, max_tokens=384, **extra)
            calls.append(
                {
                    "claim": claim,
                    "grammar": constrained,
                    "prompt_cached": n > 0,
                    "seconds": time.perf_counter() - t,
                    "prompt_tokens": out["usage"]["prompt_tokens"],
                    "completion_tokens": out["usage"]["completion_tokens"],
                }
            )
            print(json.dumps(calls[-1]), file=sys.stderr, flush=True)

    def rate(rows: list[dict]) -> float:
        return sum(r["completion_tokens"] for r in rows) / sum(r["seconds"] for r in rows)

    first = [c for c in calls if not c["prompt_cached"]]
    cached_g = [c for c in calls if c["prompt_cached"] and c["grammar"]]
    cached_f = [c for c in calls if c["prompt_cached"] and not c["grammar"]]
    # first call per claim = read the new part of the prompt + generate with the grammar
    read_s = statistics.median(c["seconds"] - c["completion_tokens"] / rate(cached_g) for c in first)
    result = {
        "model": mf.name,
        "threads": threads,
        "cpu_count": os.cpu_count(),
        "first_call_seconds_median": statistics.median(c["seconds"] for c in first),
        "prompt_read_seconds_median": read_s,
        "generation_tokens_per_s_grammar": rate(cached_g),
        "generation_tokens_per_s_free": rate(cached_f),
        "prompt_tokens_median": statistics.median(c["prompt_tokens"] for c in calls),
        "completion_tokens_median": statistics.median(c["completion_tokens"] for c in calls),
        "calls": calls,
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "verdict_speed.json").write_text(json.dumps(result, indent=2) + "\n")
    md = [
        f"# LLM verdict speed ({mf.name}, llama.cpp, {threads} threads)",
        "",
        "`python benchmarks/llm_verdict_speed.py`; the verdict prompt with 5 sentences"
        " and 2 triplet lines each.",
        "",
        "| measure | value |",
        "| --- | ---: |",
        f"| prompt tokens (median) | {result['prompt_tokens_median']:.0f} |",
        f"| completion tokens (median) | {result['completion_tokens_median']:.0f} |",
        f"| first call per claim, s (median) | {result['first_call_seconds_median']:.2f} |",
        f"| of which reading the prompt after the cached prefix, s (median) | {read_s:.2f} |",
        f"| generation with the JSON-schema grammar, tokens/s | {rate(cached_g):.1f} |",
        f"| generation without a grammar, tokens/s | {rate(cached_f):.1f} |",
        "",
    ]
    (OUT / "verdict_speed.md").write_text("\n".join(md))
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
