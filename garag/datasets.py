"""Dataset adapters: a claims reader, a corpus and a label set.

A dataset maps its own labels onto FEVER's three verdicts so that one
pipeline serves all of them.  Register your own with ``register_dataset``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from garag.claims import FEVER_LABELS, HOVER_LABELS, read_fever_claims, read_hover_claims
from garag.config import DataConfig
from garag.corpus import CorpusEdits
from garag.errors import ErrorPolicy
from garag.splits import read_split, select_part
from garag.types import Claim

REPO_ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = REPO_ROOT / "data"


@dataclass(frozen=True)
class Dataset:
    """A claims file, its corpus and its labels.

    Attributes:
        name: short name used in reports.
        claims_path: claims file.
        corpus_path: wiki-pages directory, .jsonl or .zip.
        labels: the dataset's own label strings.
        reader: claims reader for the file format.
        verdict_to_label: FEVER verdict -> this dataset's label (for scoring 3-way output).
        ptb_tokenized: whether corpus text uses FEVER's PTB tokens.
        part: "all", or "tune" / "report": only that part of the split (garag/splits.py).
        split_path: the split file; None = ``data/splits/<name>.json``.
        edits: pages added to and removed from ``corpus_path`` (garag/corpus.py).
    """

    name: str
    claims_path: Path
    corpus_path: Path
    labels: tuple[str, ...]
    reader: Callable[..., Iterator[Claim]]
    verdict_to_label: dict[str, str] = field(default_factory=dict)
    ptb_tokenized: bool = True
    part: str = "all"
    split_path: Path | None = None
    edits: CorpusEdits = CorpusEdits()

    def claims(self, policy: ErrorPolicy | None = None) -> Iterator[Claim]:
        """Stream the claims (of :attr:`part` only, when it is not "all").

        Raises:
            SplitError: the part's split file is missing, malformed or made from other claims.
        """
        stream = self.reader(self.claims_path, policy)
        if self.part == "all":
            return stream
        ids = read_split(self.default_split_path(), self.claims_path)[self.part]
        return iter(select_part(stream, ids))

    @property
    def two_way(self) -> bool:
        """Whether the labels are 2-way (HoVer's SUPPORTED / NOT_SUPPORTED): the decision model then
        gives SUPPORTS against the rest, and ``verifier.llm_judge: two_way`` acts."""
        return len(self.labels) == 2

    def default_split_path(self) -> Path:
        """:attr:`split_path`, or ``data/splits/<name>.json``."""
        return self.split_path or DATA_DIR / "splits" / f"{self.name}.json"


def fever(claims: str | Path | None = None, corpus: str | Path | None = None) -> Dataset:
    """FEVER 1.0 (paper_dev subset and its corpus by default)."""
    return Dataset(
        name="fever",
        claims_path=Path(claims or DATA_DIR / "fever" / "paper_dev.subset.jsonl"),
        corpus_path=Path(corpus or DATA_DIR / "fever" / "wiki-pages"),
        labels=FEVER_LABELS,
        reader=read_fever_claims,
        verdict_to_label={lab: lab for lab in FEVER_LABELS},
        ptb_tokenized=True,
    )


def hover(claims: str | Path | None = None, corpus: str | Path | None = None) -> Dataset:
    """HoVer multi-hop subset: SUPPORTS -> SUPPORTED, REFUTES/NEI -> NOT_SUPPORTED."""
    return Dataset(
        name="hover",
        claims_path=Path(claims or DATA_DIR / "hover" / "claims.jsonl"),
        corpus_path=Path(corpus or DATA_DIR / "hover" / "wiki-pages"),
        labels=HOVER_LABELS,
        reader=read_hover_claims,
        verdict_to_label={
            "SUPPORTS": "SUPPORTED",
            "REFUTES": "NOT_SUPPORTED",
            "NOT ENOUGH INFO": "NOT_SUPPORTED",
        },
        ptb_tokenized=False,
    )


_REGISTRY: dict[str, Callable[..., Dataset]] = {"fever": fever, "hover": hover}


def register_dataset(name: str, factory: Callable[..., Dataset]) -> None:
    """Make a dataset available by name to the CLI and configs."""
    _REGISTRY[name] = factory


def dataset_from_config(data: DataConfig) -> Dataset:
    """The dataset a config's ``data`` section names (its part of the split included)."""
    dataset = get_dataset(data.dataset, data.claims, data.corpus, data.claim_format, data.part, data.split)
    edits = CorpusEdits(tuple(map(Path, data.add_pages)), tuple(map(Path, data.remove_pages)))
    return dataclasses.replace(dataset, edits=edits) if edits else dataset


def get_dataset(
    name: str,
    claims: str = "",
    corpus: str = "",
    claim_format: str = "fever",
    part: str = "all",
    split: str = "",
) -> Dataset:
    """A dataset by name; ``custom`` takes explicit paths and a claim format.

    Args:
        part: "all", "tune" or "report" (see garag/splits.py).
        split: the split file; "" = ``data/splits/<name>.json``.

    Raises:
        ValueError: unknown name, or ``custom`` without paths.
    """
    if part not in ("all", "tune", "report"):
        raise ValueError(f"data.part: must be all, tune or report, got {part!r}")
    extra = {"part": part, "split_path": Path(split) if split else None}
    if name == "custom":
        if not claims or not corpus:
            raise ValueError("data.dataset=custom needs data.claims and data.corpus")
        base = fever if claim_format == "fever" else hover
        return Dataset(**{**base(claims, corpus).__dict__, "name": Path(claims).stem, **extra})
    if name not in _REGISTRY:
        raise ValueError(f"unknown dataset {name!r} (known: {', '.join(sorted(_REGISTRY))}, custom)")
    return dataclasses.replace(_REGISTRY[name](claims or None, corpus or None), **extra)
