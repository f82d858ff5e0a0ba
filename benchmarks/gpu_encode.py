"""Dense encoding on a GPU: garag's own encoder and embedding cache (``retrievers/embeddings.py``,
what ``garag index`` runs for ``dense``) with ``dense.device: cuda``, against the CPU.

Three steps, so that the GPU machine needs neither the corpus nor network access (``make bench-gpu``
runs all three on one CUDA machine with garag installed):

``prep --corpus WIKI.jsonl... --n N --out DIR``  (here)
    The first N sentences of the corpus files (FEVER wiki-pages format, every non-empty line of
    every page, in file order) as DIR/sentences.txt.xz, one a line.  The model is ``minilm`` (the
    packaged all-MiniLM-L6-v2) or a local model directory copied beside it.

``run --model DIR --sentences FILE --out DIR``  (on the GPU machine)
    Encodes every sentence with ``SentenceEncoder(model, device="cuda")`` at each ``--batch``
    size, timed after a warm-up, then the same through ``EmbeddingCache.encode_cached`` into a
    fresh cache (chunks of 8,192 encoded and committed to SQLite, as the index build does), and
    ``--cpu-n`` of them on the CPU (all its cores) for reference.  Writes ``result.json`` and the
    first ``--keep`` sentences' CUDA vectors (``cuda-head.npy``) for ``check``.

``check --result DIR --sentences FILE --model minilm``  (here)
    Encodes the kept sentences with ``--model`` on this CPU and prints the cosine of each CUDA
    vector with its CPU twin (a model copied in another form, e.g. rebuilt from int8 weights for a
    machine with capped uploads, accounts for most of any gap).
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def read_sentences(path: Path) -> list[str]:
    with lzma.open(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f if line.strip()]


def prep(corpus: list[Path], n: int, out: Path) -> None:
    texts: list[str] = []
    for path in corpus:
        try:
            f = path.open(encoding="utf-8")
        except OSError as e:
            raise SystemExit(f"{path}: cannot read ({e.strerror})") from None
        with f:
            for number, row in enumerate(f, start=1):
                try:
                    page = json.loads(row)
                except ValueError as e:
                    raise SystemExit(f"{path}:{number}: not a JSON page ({e})") from None
                for line in page.get("lines", "").split("\n"):
                    parts = line.split("\t")
                    if len(parts) > 1 and parts[1].strip():
                        texts.append(" ".join(parts[1].split()))
                        if len(texts) == n:
                            break
                if len(texts) == n:
                    break
        if len(texts) == n:
            break
    out.mkdir(parents=True, exist_ok=True)
    with lzma.open(out / "sentences.txt.xz", "wt", encoding="utf-8", preset=9) as f:
        f.writelines(t + "\n" for t in texts)
    size = (out / "sentences.txt.xz").stat().st_size
    print(f"{len(texts)} sentences, {size} bytes -> {out / 'sentences.txt.xz'}")


def _timed(fn, *args):  # noqa: ANN001, ANN202 - any callable
    started = time.perf_counter()
    value = fn(*args)
    return value, time.perf_counter() - started


def run(
    model: str,
    sentences: Path,
    out: Path,
    batches: list[int],
    cpu_n: int,
    keep: int,
    repeat: int,
    device: str,
) -> None:
    import numpy as np
    import torch

    from retrievers.embeddings import EmbeddingCache, SentenceEncoder

    texts = read_sentences(sentences)
    if not texts:
        raise SystemExit(f"{sentences}: no sentences")
    keep, cpu_n = min(keep, len(texts)), min(cpu_n, len(texts))
    out.mkdir(parents=True, exist_ok=True)
    cuda = device == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    result: dict = {
        "sentences": len(texts),
        "distinct": len(set(texts)),  # what a fresh cache encodes
        "repeat": repeat,
        "mean_chars": sum(map(len, texts)) / len(texts),
        "gpu": torch.cuda.get_device_name(0) if cuda else None,
        "torch": torch.__version__,
        "cpu_cores": os.cpu_count(),
        "python": platform.python_version(),
        "runs": [],
    }
    head = None
    for batch in batches:
        enc = SentenceEncoder(model, device=device, batch_size=batch).load()
        enc.encode(texts[:2048])  # warm-up: CUDA context, kernels, tokenizer
        sync()
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        vecs, seconds = _timed(enc.encode, texts * repeat)  # repeated: long enough to time
        sync()
        result["runs"].append(
            {
                "what": "SentenceEncoder.encode",
                "device": device,
                "batch": batch,
                "sentences": len(texts) * repeat,
                "seconds": round(seconds, 3),
                "sentences_per_s": round(len(texts) * repeat / seconds, 1),
                "peak_gpu_mib": round(torch.cuda.max_memory_allocated() / 2**20, 1) if cuda else None,
            }
        )
        print(json.dumps(result["runs"][-1]), flush=True)
        if head is None:
            head = vecs[:keep]
        with tempfile.TemporaryDirectory() as tmp:
            cache = EmbeddingCache(enc, tmp)
            cached, seconds = _timed(cache.encode_cached, texts)
            again, again_s = _timed(cache.encode_cached, texts[:50_000])
            cache.close()
        cos = np.einsum("ij,ij->i", cached[:keep], vecs[:keep])  # float16 storage, renormalised
        result["runs"].append(
            {
                "what": "EmbeddingCache.encode_cached (fresh cache, SQLite writes)",
                "device": device,
                "sentences": len(texts),
                "batch": batch,
                "seconds": round(seconds, 3),
                "sentences_per_s": round(len(texts) / seconds, 1),
                "cache_hits_per_s": round(min(50_000, len(texts)) / again_s, 1),
                "min_cosine_float16_storage": float(cos.min()),
            }
        )
        print(json.dumps(result["runs"][-1]), flush=True)
        del enc
        if cuda:
            torch.cuda.empty_cache()
    cpu = SentenceEncoder(model, device="cpu", batch_size=128).load()
    cpu.encode(texts[:256])
    cpu_vecs, seconds = _timed(cpu.encode, texts[:cpu_n])
    result["runs"].append(
        {
            "what": "SentenceEncoder.encode",
            "device": "cpu",
            "threads": torch.get_num_threads(),
            "batch": 128,
            "sentences": cpu_n,
            "seconds": round(seconds, 3),
            "sentences_per_s": round(cpu_n / seconds, 1),
        }
    )
    print(json.dumps(result["runs"][-1]), flush=True)
    n = min(keep, cpu_n)
    cos = np.einsum("ij,ij->i", head[:n], cpu_vecs[:n])
    result["cuda_vs_cpu_same_weights"] = {
        "n": n,
        "min_cosine": float(cos.min()),
        "mean_cosine": float(cos.mean()),
    }
    print(json.dumps(result["cuda_vs_cpu_same_weights"]), flush=True)
    np.save(out / "cuda-head.npy", head)
    (out / "result.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


def check(result_dir: Path, sentences: Path, model: str) -> None:
    import numpy as np

    from retrievers.embeddings import SentenceEncoder

    head = np.load(result_dir / "cuda-head.npy")
    texts = read_sentences(sentences)[: len(head)]
    here = SentenceEncoder(model, device="cpu").encode(texts)
    cos = np.einsum("ij,ij->i", head, here)
    print(
        f"{len(texts)} sentences: cosine of the GPU machine's CUDA vectors with "
        f"this CPU's ({model}): min {cos.min():.4f}, mean {cos.mean():.4f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prep")
    p.add_argument("--corpus", type=Path, nargs="+", required=True)
    p.add_argument("--n", type=int, default=200_000)
    p.add_argument("--out", type=Path, required=True)
    r = sub.add_parser("run")
    r.add_argument("--model", required=True)
    r.add_argument("--sentences", type=Path, required=True)
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--batch", type=int, nargs="+", default=[128, 512])
    r.add_argument("--cpu-n", type=int, default=20_000)
    r.add_argument("--keep", type=int, default=2000)
    r.add_argument("--repeat", type=int, default=4, help="the raw encode reads the sentences this many times")
    r.add_argument(
        "--device", choices=("cuda", "cpu"), default="cuda", help="cpu: a dry run of the script here"
    )
    c = sub.add_parser("check")
    c.add_argument("--result", type=Path, required=True)
    c.add_argument("--sentences", type=Path, required=True)
    c.add_argument("--model", default="minilm")
    args = ap.parse_args()
    if args.cmd == "prep":
        if args.n <= 0:
            raise SystemExit(f"--n {args.n}: give a positive number of sentences")
        prep(args.corpus, args.n, args.out)
    elif args.cmd == "run":
        run(args.model, args.sentences, args.out, args.batch, args.cpu_n, args.keep, args.repeat, args.device)
    else:
        check(args.result, args.sentences, args.model)


if __name__ == "__main__":
    main()
