"""Fit the decision model (:mod:`verifier.decision`) beside garag's trained verifier.

The fitting data are training data only: the FEVER train claims the verifier held out for
validation (it never trained on them; evaluation claims were dropped before the split), each
read as the pipeline reads a claim (the retrievers' top-k sentences):

* the claim with its retrieved sentences, labelled with its gold label, and the same ranking
  with its gold sentences removed, labelled NOT ENOUGH INFO (as for the claim aggregator);
* its contrast twins (:mod:`training.contrast`: negation both ways, numbers moved, roles
  swapped, relations replaced, entities substituted), read with the original claim's retrieved
  sentences, labelled by the generator's rules (a negation of a SUPPORTS claim is REFUTES and of a
  REFUTES claim SUPPORTS, so polarity alone tells nothing), and every other twin also comes
  without its gold sentences, labelled NOT ENOUGH INFO, so that a change is no shortcut to a label;
* compositions of 2-4 claims, the multi-part claims HoVer asks about: of twins and unchanged
  claims (:func:`training.contrast.compose_contrasts`, read with every part's gold sentences, then
  the parts' retrieved ones), and of claims with retrieved distractors (conjunctions and bridges,
  :mod:`training.compositional`);
* corpus bridges (:mod:`training.bridges`): a claim chained with 1-3 corpus sentences of pages it
  names, as made, with a name substituted in a corpus part (read with the same sentences, as
  HoVer's NOT_SUPPORTED claims are read), and with one part's page left out of the reading.

A fifth of the claims (whole, with their twins and chains) is held out to choose the regularisation
and report the model's accuracy and calibration; the stored model is then fitted on all of them.
"""

from __future__ import annotations

import copy
import logging
import random
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tqdm import tqdm

from garag.config import Config
from garag.types import Evidence, Label
from pipeline.decompose import RuleDecomposer
from training.bridges import bridge_instances
from training.compositional import compose_examples
from training.contrast import (
    ChangeType,
    compose_contrasts,
    composed_premise,
    contrast_claims,
    sources_from_claims,
)
from training.data import TrainClaim, aggregator_instances, fetch_evidence
from verifier.base import Verifier
from verifier.claim_aggregator import balanced_accuracy
from verifier.decision import (
    DecisionCase,
    DecisionFeatures,
    DecisionModel,
    decision_label,
    expected_calibration_error,
    fit_decision,
)
from verifier.labels import LABEL_ORDER
from verifier.nli import NLIVerifier
from verifier.pair_memory import PairMemories

logger = logging.getLogger(__name__)
VERIFY_BATCH = 64
HELD_OUT = 0.2
COMPOSED_SHARE = 0.35  # composed claims of each kind per validation claim
L2_GRID = (1e-3, 1e-2, 1e-1, 1.0)  # the decision's regularisation, chosen on held-out instances


def decision_instances(
    claims: Sequence[TrainClaim],
    retrieved: Sequence[Sequence],
    store,
    top_k: int,
    seed: int,  # noqa: ANN001
) -> tuple[list[tuple[str, tuple[Evidence, ...], Label, int]], Counter]:
    """``(claim, read sentences, label, group)`` instances (see the module docstring); ``group`` is
    the index of the validation claim an instance comes from (-1: a composition), for held-out splits."""
    rng = random.Random(seed)
    out = [
        (text, ev, label, i // 2)
        for i, (text, ev, label) in enumerate(aggregator_instances(claims, retrieved, store, top_k))
    ]
    counts: Counter = Counter({"claims": len(claims), "claim_instances": len(out)})
    index = {c.id: i for i, c in enumerate(claims)}
    sources = sources_from_claims(claims, store)
    made = contrast_claims(sources, seed, compositions=round(COMPOSED_SHARE * len(claims)))
    twins = [t for t in made if t.change is not ChangeType.COMPOSED]
    texts: dict = {}
    for twin in twins:
        i = index[twin.claim_id]
        ranked = retrieved[i]
        out.append((twin.text, fetch_evidence(store, ranked, texts)[:top_k], twin.label, i))
        counts[f"twin_{twin.change.value}_{twin.label.value}"] += 1
        if rng.random() < 0.5:
            gold = set(claims[i].evidence)
            without = fetch_evidence(store, [s for s in ranked if s not in gold], texts)[:top_k]
            out.append((twin.text, without, Label.NOT_ENOUGH_INFO, i))
            counts["twin_without_gold"] += 1
    # HoVer's kind of claim: 2-4 parts, one of them changed, read with every part's evidence and
    # the parts' retrieved sentences after it; and as many whose refuted part has a name
    # substituted, how HoVer's NOT_SUPPORTED claims were written (their supported ones have twins
    # made SUPPORTS by negation among their parts: compose_contrasts needs changed claims of both)
    substituted = [t for t in twins if t.change is ChangeType.ENTITY or t.label is Label.SUPPORTS]
    made += compose_contrasts(substituted, sources, round(COMPOSED_SHARE * len(claims)), seed + 7)
    for c in (t for t in made if t.change is ChangeType.COMPOSED):
        premise = composed_premise(c, index, retrieved, store, top_k, texts)
        if premise is None:
            counts["composed_contrast_skipped_evidence_over_top_k"] += 1
            continue
        out.append((c.text, premise, c.label, -1))
        counts[f"composed_contrast_{len(c.parts)}_{c.label.value}"] += 1
    composed, made_counts = compose_examples(
        claims, retrieved, store, n=round(COMPOSED_SHARE * len(claims)), top_k=top_k, seed=seed + 1
    )
    out.extend((c.example.claim, c.example.evidence, c.example.label, -1) for c in composed)
    counts.update({f"composed_{k}": v for k, v in made_counts.items() if isinstance(k, str)})
    bridges, bridge_counts = bridge_instances(claims, retrieved, store, top_k, seed + 11)
    out.extend(bridges)
    counts.update({f"corpus_{k}": v for k, v in bridge_counts.items()})
    return out, counts


def verdicts_of(
    verifier: Verifier, texts: Sequence[str], evidence: Sequence[Sequence[Evidence]], progress: bool
):  # noqa: ANN201
    """The verifier's verdicts in batches (a progress bar over claims)."""
    out = []
    bar = tqdm(total=len(texts), desc="decision data: verifier", unit=" claims", disable=not progress)
    for i in range(0, len(texts), VERIFY_BATCH):
        out.extend(verifier.verify_batch(texts[i : i + VERIFY_BATCH], evidence[i : i + VERIFY_BATCH]))
        bar.update(len(texts[i : i + VERIFY_BATCH]))
    bar.close()
    return out


def fit_decision_model(
    config: Config,
    model_dir: str | Path,
    claims: Sequence[TrainClaim],
    retrieved: Sequence[Sequence],
    store,  # noqa: ANN001 - the training corpus's SentenceStore
    progress: bool = True,
    memories: PairMemories | None = None,
) -> dict:
    """Fit the decision model on the held-out train ``claims`` and store it beside the verifier
    (``memories``: the pool of NLI pairs scored already, :mod:`verifier.pair_memory`).

    Returns:
        The model's ``info``: instance counts, held-out accuracy, balanced accuracy and calibration
        error, and the verifier's own held-out accuracy for comparison.
    """
    started = time.time()
    top_k = config.verifier.top_k
    instances, counts = decision_instances(claims, retrieved, store, top_k, config.train.seed)
    vcfg = copy.deepcopy(config.verifier)
    vcfg.precision = "float32"  # part of the trained artifact: never fitted at bf16
    verifier = NLIVerifier(vcfg, str(model_dir), memories).load()
    texts = [t for t, _, _, _ in instances]
    evidence = [ev for _, ev, _, _ in instances]
    verdicts = verdicts_of(verifier, texts, evidence, progress)
    decomposer = RuleDecomposer(config.decomposition).load()
    cases = [
        DecisionCase(t, tuple(ev), v, tuple(ps))
        for t, ev, v, ps in zip(texts, evidence, verdicts, decomposer.subclaims_batch(texts), strict=True)
    ]
    features, _ = DecisionFeatures(verifier.score_sentences, config.decomposition.spacy_model, top_k)(cases)
    gold = [lab for _, _, lab, _ in instances]
    groups = np.array([g for _, _, _, g in instances])
    model = fit_held_out(
        features, gold, groups, [v.label for v in verdicts], len(claims), config.train.seed, top_k
    )
    model.info.update(
        {"data": dict(counts), "instances": len(instances), "seconds": round(time.time() - started, 1)}
    )
    path = model.save(model_dir)
    logger.info("decision model: %s -> %s", model.info, path)
    return model.info


def fit_held_out(
    features: np.ndarray,
    gold: Sequence[Label],
    groups: np.ndarray,
    verifier_labels: Sequence[Label],
    n_claims: int,
    seed: int,
    top_k: int,
) -> DecisionModel:
    """Choose the regularisation on held-out instances, then fit on all of them.

    A fifth of the claims (``groups``: the claim an instance comes from; -1, a composition: each
    held out with the same odds) is held out.  Each of :data:`L2_GRID` is fitted on the rest; the
    one with the best held-out balanced accuracy (ties: the stronger) is fitted on every instance.
    ``info`` records the grid's held-out scores and, for the chosen one, accuracy, balanced
    accuracy, calibration error and the verifier's own accuracy on the same instances.
    """
    rng = np.random.default_rng(seed)
    held_groups = set(rng.permutation(n_claims)[: round(HELD_OUT * n_claims)].tolist()) | {-1}
    held = np.array([g in held_groups and (g != -1 or rng.random() < HELD_OUT) for g in groups])
    held_gold = [g for g, h in zip(gold, held, strict=True) if h]
    kept_gold = [g for g, h in zip(gold, held, strict=True) if not h]
    grid: dict[float, tuple[float, np.ndarray, list[Label]]] = {}
    for l2 in L2_GRID:
        probs = fit_decision(features[~held], kept_gold, top_k, l2).predict_proba(features[held])
        predicted = [decision_label(p, two_way=False) for p in probs]
        grid[l2] = (balanced_accuracy(held_gold, predicted), probs, predicted)
    best = max(L2_GRID, key=lambda l2: (round(grid[l2][0], 4), l2))
    _, probs, predicted = grid[best]
    own = [v for v, h in zip(verifier_labels, held, strict=True) if h]
    model = fit_decision(features, gold, top_k, best)
    model.info.update(
        {
            "held_out_instances": int(held.sum()),
            "held_out_balanced_accuracy_by_l2": {str(k): round(v[0], 4) for k, v in grid.items()},
            "held_out_accuracy": round(
                float(np.mean([p is g for p, g in zip(predicted, held_gold, strict=True)])), 4
            ),
            "held_out_balanced_accuracy": round(balanced_accuracy(held_gold, predicted), 4),
            "held_out_ece": round(
                expected_calibration_error(probs, [LABEL_ORDER.index(g) for g in held_gold]), 4
            ),
            "held_out_verifier_accuracy": round(
                float(np.mean([p is g for p, g in zip(own, held_gold, strict=True)])), 4
            ),
        }
    )
    return model
