"""Run the garag CLI with every verifier call recorded, or answered from another model's scores.

A model trained on a lent GPU machine cannot come back here (its weights are larger than what a
device call returns), so its accuracy in the full pipeline is measured in three steps:

1. ``GPAIRS=record GPAIRS_FILE=pairs.jsonl python pairs.py evaluate ...``: run the pipeline with
   the MiniLM verifier and write every (premise, claim) pair it scores, with the model folder;
2. on the GPU machine, score those pairs with the new model (train_on_device.py);
3. ``GPAIRS=replay GPAIRS_PROBS=probs.jsonl.gz GPAIRS_MAP='{"<model folder>": "<tag>"}' python
   pairs.py evaluate --set verifier.model=<folder> ...``: run the pipeline again, each pair's
   probabilities taken from the GPU model's scores (a pair not scored there is an error; a model
   folder mapped to ``null`` scores its own pairs, e.g. MiniLM beside a replayed mpnet in a
   ``verifier.mix_weight`` run).

The folder given as ``verifier.model`` in step 3 holds the GPU model's calibration (and, for
per-sentence mode, a claim aggregator fitted on its scores); only its weights are MiniLM's, and
they are never used.  The pipeline is otherwise unchanged: retrieval, programs, the 2-way
threshold and the entity check run here.
"""

from __future__ import annotations

import atexit
import gzip
import json
import os
import sys
from pathlib import Path

import numpy as np

import verifier.nli as nli

_original = nli.NLIVerifier.predict_pairs


def _tag(verifier: nli.NLIVerifier) -> str:
    path = Path(verifier.model_path)
    return path.parent.name if path.name == "model" else path.name


def install() -> None:
    """Patch NLIVerifier.predict_pairs as $GPAIRS says (record or replay)."""
    mode = os.environ["GPAIRS"]
    if mode == "record":
        out = open(os.environ["GPAIRS_FILE"], "a", encoding="utf-8")  # noqa: SIM115 - closed at exit
        atexit.register(out.close)

        def predict_pairs(self, premises, claims):  # noqa: ANN001, ANN202
            tag = _tag(self)
            for p, c in zip(premises, claims, strict=True):
                out.write(json.dumps({"m": tag, "p": p, "c": c}) + "\n")
            out.flush()
            return _original(self, premises, claims)

    elif mode == "replay":
        mapping = json.loads(os.environ["GPAIRS_MAP"])
        table = {}
        with gzip.open(os.environ["GPAIRS_PROBS"], "rt", encoding="utf-8") as fh:
            for line in fh:
                r = json.loads(line)
                table[(r["m"], r["p"], r["c"])] = r["probs"]

        def predict_pairs(self, premises, claims):  # noqa: ANN001, ANN202
            tag = mapping[_tag(self)]
            if tag is None:  # mapped to null: this model scores its pairs itself
                return _original(self, premises, claims)
            rows = []
            for p, c in zip(premises, claims, strict=True):
                if (tag, p, c) not in table:
                    raise KeyError(f"replay: a pair not scored for {tag}: {c[:60]!r}")
                rows.append(table[(tag, p, c)])
            self.pairs_scored += len(rows)
            return np.asarray(rows, dtype=np.float64).reshape(len(rows), 3)

    else:
        raise SystemExit(f"GPAIRS={mode!r}: record or replay")
    nli.NLIVerifier.predict_pairs = predict_pairs


if __name__ == "__main__":
    install()
    from app.cli import main

    sys.exit(main(sys.argv[1:]))
