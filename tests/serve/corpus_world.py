"""A world of its own for the tests that edit the served corpus (the session's world in conftest.py
is shared, so it must not change): copies of the serve tests' corpus and configs under a temporary
directory, with their own cache and state directories, and invented pages to add."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import yaml

SYLLABLES = ["kor", "vel", "zin", "tam", "rux", "bel", "quo", "nir", "dap", "sel"]


def page_name(i: int) -> str:
    """An invented, one-word place name per number (no page of the fixture corpus has it)."""
    return ("Zy" + SYLLABLES[i // 10 % 10] + SYLLABLES[i % 10] + "ovia").capitalize()


def invented_page(i: int) -> dict:
    name = page_name(i)
    lines = [f"{name} is a glimmerstone village in the Vellmoria highlands .",
             f"{name} was founded by the lantern makers of Vellmoria ."]  # fmt: skip
    return {"id": name, "text": " ".join(lines), "lines": "\n".join(f"{n}\t{s}" for n, s in enumerate(lines))}


def pages_jsonl(numbers: range | list[int]) -> bytes:
    return "".join(json.dumps(invented_page(i)) + "\n" for i in numbers).encode()


def claim_about(i: int) -> str:
    return f"{page_name(i)} is a glimmerstone village in the Vellmoria highlands."


def make_configs(world, root: Path) -> dict[str, Path]:  # noqa: ANN001 - conftest.World
    """Three configs: ``baseline`` and ``programs`` on one copy of the corpus (so an edit applies to
    both), ``other`` on another corpus (its first six pages), each with the world's trained verifier."""
    corpus, other = root / "wiki-pages", root / "other-pages"
    shutil.copytree(world.corpus, corpus)
    other.mkdir()
    src = sorted(world.corpus.glob("*.jsonl"))[0]
    (other / src.name).write_text(
        "".join(src.read_text(encoding="utf-8").splitlines(keepends=True)[:6]), encoding="utf-8"
    )
    base = yaml.safe_load(world.configs["baseline"].read_text(encoding="utf-8"))
    base["paths"] = {"cache_dir": str(root / "cache"), "results_dir": str(root / "results")}
    variants = {
        "baseline": {**base, "data": {**base["data"], "corpus": str(corpus)}},
        "programs": {
            **base,
            "data": {**base["data"], "corpus": str(corpus)},
            "reasoning": {"programs": "rule"},
        },
        "other": {**base, "data": {**base["data"], "corpus": str(other)}},
    }
    paths = {}
    for name, cfg in variants.items():
        paths[name] = root / f"{name}.yaml"
        paths[name].write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return paths


def make_service(configs: list[Path], root: Path, factory=None, **settings):  # noqa: ANN001, ANN201
    """A loaded service over ``configs`` keeping its state under ``root/state`` (``factory``: see
    :class:`Service`)."""
    from app.serve.service import ServeSettings, Service, load_configs

    options = {"max_batch": 8, "micro_batch": 8, "max_wait": 0.02, "timeout": 60} | settings
    s = ServeSettings(results_dir=root / "results", state_dir=root / "state", **options)
    svc = Service(load_configs([str(p) for p in configs]), s, factory=factory).load()
    assert svc.ready, svc.error
    return svc


def wait_for_update(get, update_id: str, timeout: float = 180) -> dict:  # noqa: ANN001 - GET -> response
    """Poll ``GET /v1/corpus/updates/{id}`` until the update is done or failed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        u = get(f"/v1/corpus/updates/{update_id}").json()
        if u["status"] in ("done", "failed"):
            return u
        time.sleep(0.1)
    raise AssertionError(f"corpus update {update_id} did not finish in {timeout} s")
