"""The run browser's data: ``compare`` runs under the results directory, read only.

A run is a directory with ``run.json`` (identity), ``metrics.json`` (scores,
significance, slices) and ``predictions/<system>.jsonl``.  Claims are joined
across systems by id; their slices and hop counts come from the run's claims
file when it can still be read (else from the records alone).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import math
import threading
from dataclasses import dataclass
from pathlib import Path

from garag.claims import HOVER_LABELS
from garag.config import load_config
from garag.datasets import dataset_from_config
from garag.jsonl import read_records
from garag.types import Claim

logger = logging.getLogger(__name__)

HEADLINE = ("label_accuracy", "macro_f1", "fever_score", "hover_score", "evidence_f1")


class RunNotFound(LookupError):
    """No such run (or not a complete one)."""


@dataclass
class RunData:
    run_id: str
    path: Path
    identity: dict
    metrics: dict
    systems: list[str]
    records: dict[str, dict[str, dict]]  # system -> claim key -> record
    claims: list[dict]  # in run order: id, claim, label, hops, slices, gold evidence

    @functools.cached_property
    def rows(self) -> list[dict]:
        """Every claim with each system's prediction (``correct`` None where the gold label is unknown);
        built once per loaded run (treat as read only)."""
        rows = []
        for c in self.claims:
            key = json.dumps(c["id"])
            systems = {}
            for name in self.systems:
                r = self.records[name].get(key)
                if r is None:
                    continue
                gold = c["label"]
                systems[name] = {
                    "predicted_label": r.get("predicted_label", ""),
                    "dataset_label": r.get("dataset_label", r.get("predicted_label", "")),
                    "correct": None if gold is None else r.get("dataset_label") == gold,
                    "explanation": r.get("explanation", ""),
                    "evidence_read": r.get("evidence_read", []),
                    "scores": r.get("scores", {}),
                }
            rows.append({k: c[k] for k in ("id", "claim", "label", "hops", "slices")} | {"systems": systems})
        return rows

    @functools.cached_property
    def by_id(self) -> dict[str, tuple[dict, dict]]:
        """``str(claim id) -> (row, claim info)``."""
        return {str(c["id"]): (row, c) for row, c in zip(self.rows, self.claims, strict=True)}


def _claim_info(claim: Claim) -> dict:
    from eval.slices import slice_keys

    return {
        "id": claim.id,
        "claim": claim.text,
        "label": claim.label,
        "hops": claim.num_hops,
        "slices": slice_keys(claim),
        "gold": [[s.to_json() for s in group] for group in claim.evidence],
    }


class RunIndex:
    """Compare runs under ``results_dir``, loaded lazily and reloaded when their metrics change."""

    def __init__(self, results_dir: str | Path) -> None:
        self.root = Path(results_dir)
        self._cache: dict[str, tuple[float, RunData]] = {}
        self._locks: dict[str, threading.Lock] = {}  # one per run: loading one never waits on another
        self._locks_lock = threading.Lock()

    def run_ids(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(
            p.name
            for p in self.root.iterdir()
            if p.is_dir() and (p / "run.json").is_file() and (p / "metrics.json").is_file()
        )

    def summaries(self) -> list[dict]:
        out = []
        for run_id in self.run_ids():
            try:
                metrics = json.loads((self.root / run_id / "metrics.json").read_text(encoding="utf-8"))
            except (OSError, ValueError) as e:
                logger.warning("run %s: unreadable metrics.json (%s)", run_id, e)
                continue
            per = metrics.get("per_system", {})
            out.append(
                {
                    "run_id": run_id,
                    "dataset": str(metrics.get("dataset", "")),
                    "systems": list(metrics.get("systems", per.keys())),
                    "n_claims": int(metrics.get("n_claims", 0)),
                    "metrics": {s: {k: _num(m.get(k)) for k in HEADLINE} for s, m in per.items()},
                }
            )
        return out

    def get(self, run_id: str) -> RunData:
        """A run by id (only names listed by :meth:`run_ids`: no paths)."""
        if run_id not in self.run_ids():
            raise RunNotFound(f"no run {run_id!r} under {self.root}")
        path = self.root / run_id
        stamp = (path / "metrics.json").stat().st_mtime
        with self._locks_lock:
            lock = self._locks.setdefault(run_id, threading.Lock())
        with lock:
            hit = self._cache.get(run_id)
            if hit is not None and hit[0] == stamp:
                return hit[1]
            data = self._load(run_id, path)
            self._cache[run_id] = (stamp, data)
            return data

    def _load(self, run_id: str, path: Path) -> RunData:
        identity = json.loads((path / "run.json").read_text(encoding="utf-8"))
        metrics = json.loads((path / "metrics.json").read_text(encoding="utf-8"))
        systems = [s["name"] for s in identity.get("systems", [])]
        records: dict[str, dict[str, dict]] = {}
        for name in systems:
            file = path / "predictions" / f"{name}.jsonl"
            rows = read_records(file) if file.is_file() else []
            records[name] = {json.dumps(r["id"]): r for r in rows}
        claims = self._claims(path, identity, systems, records)
        return RunData(run_id, path, identity, metrics, systems, records, claims)

    def _claims(self, path: Path, identity: dict, systems: list[str], records: dict) -> list[dict]:
        ids = identity.get("claim_ids", [])
        try:
            config = load_config(path / "configs" / f"{systems[0]}.yaml")
            ds = dataset_from_config(config.data)
            ds = dataclasses.replace(ds, claims_path=Path(identity["dataset"]["claims"]), part="all")
            wanted = {json.dumps(i) for i in ids}
            by_id = {json.dumps(c.id): c for c in ds.claims() if json.dumps(c.id) in wanted}
            if len(by_id) == len(wanted):
                return [_claim_info(by_id[json.dumps(i)]) for i in ids]
            logger.warning("run %s: its claims file lacks some of its claims; slices are left out", path.name)
        except Exception as e:  # noqa: BLE001 - the run stays browsable from its records alone
            logger.warning("run %s: claims file unreadable (%s); slices are left out", path.name, e)
        out = []
        for i in ids:
            r = next((records[s][json.dumps(i)] for s in systems if json.dumps(i) in records[s]), {})
            label = r.get("label")
            out.append(
                {"id": i, "claim": r.get("claim", ""), "label": label, "hops": None,
                 "slices": [f"label {label}"] if label else [], "gold": []}
            )  # fmt: skip
        return out


def filter_claims(
    rows: list[dict],
    system: str | None = None,
    label: str | None = None,
    correct: bool | None = None,
    slice_name: str | None = None,
    disagree: bool | None = None,
    hops: int | None = None,
    query: str | None = None,
) -> list[dict]:
    """The rows matching every given filter.

    ``correct`` applies to ``system`` (required with it); ``disagree`` keeps claims on which the
    systems' correctness differs (True) or agrees (False); ``query`` is a case-blind substring of
    the claim.
    """
    if correct is not None and not system:
        raise ValueError("correct= needs system=")
    out = []
    q = query.casefold() if query else None
    for row in rows:
        if system and system not in row["systems"]:
            continue
        if label and row["label"] != label:
            continue
        if correct is not None and row["systems"][system]["correct"] is not correct:
            continue
        if slice_name and slice_name not in row["slices"]:
            continue
        if hops is not None and row["hops"] != hops:
            continue
        if disagree is not None:
            rights = {s["correct"] for s in row["systems"].values()}
            if (len(rights) > 1) is not disagree:
                continue
        if q and q not in row["claim"].casefold():
            continue
        out.append(row)
    return out


def page_of(rows: list[dict], page: int, page_size: int) -> tuple[list[dict], int]:
    """``(rows of page, number of pages)``; pages count from 1."""
    pages = max(1, math.ceil(len(rows) / page_size))
    return rows[(page - 1) * page_size : page * page_size], pages


def run_labels(data: RunData) -> list[str]:
    labels = sorted({c["label"] for c in data.claims if c["label"]})
    return labels or list(HOVER_LABELS)


def _num(x: object) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None
