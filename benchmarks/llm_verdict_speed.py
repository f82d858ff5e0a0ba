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

from eval.run_env import machine
from garag.config import load_config
from garag.llm.backends import make_chat_model
from garag.llm.structured import json_schema
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
    ap.add_argument("--threads", type=int, default=0, help="llm.n_threads (0 = all cores)")
    ap.add_argument("--cache", default="cache")
    args = ap.parse_args(argv)
    config = load_config(
        overrides=[
            "llm.backend=llama_cpp",
            f"llm.model={args.model}",
            f"llm.n_threads={args.threads}",
            f"paths.cache_dir={args.cache}",
        ]
    )
    # the backend garag's LLM verifier calls (streaming, deadline), without the response cache
    chat = make_chat_model(config.llm, args.cache)
    threads = args.threads or (os.cpu_count() or 1)
    prompt = load_prompt("verdict")
    schema = json_schema(VerdictReply)  # what LLMClient sends: $defs inlined
    timeout = config.llm.timeout_s
    chat.complete(prompt.render(claim="Warm-up.", evidence="[1] x"), None, timeout)  # the fixed prefix

    calls = []
    for claim in CLAIMS:
        messages = prompt.render(claim=claim, evidence=evidence_block())
        for n, constrained in enumerate((True, False, True, False)):
            t = time.perf_counter()
            reply = chat.complete(messages, schema if constrained else None, timeout)
            calls.append(
                {
                    "claim": claim,
                    "grammar": constrained,
                    "prompt_cached": n > 0,
                    "seconds": time.perf_counter() - t,
                    "prompt_tokens": reply.prompt_tokens,
                    "completion_tokens": reply.completion_tokens,
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
        "model": chat.fingerprint,
        "threads": threads,
        "machine": machine(),
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
        f"# LLM verdict speed ({config.llm.model}, llama.cpp, {threads} threads)",
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
