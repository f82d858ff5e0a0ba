"""Verifier components by name (``pipeline.verifier``), imported lazily, with an install hint for
missing extras: the pipeline builds whichever one its config names and never asks which it is."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from garag.config import Config, ConfigError
from garag.config.base import check_component_name
from garag.config.run import VERIFIERS, known_verifiers, register_verifier_name
from verifier.base import Verifier

if TYPE_CHECKING:
    from garag.llm import LLMClient
    from verifier.pair_memory import PairMemories


@dataclass(frozen=True)
class VerifierContext:
    """What a verifier component may need to build itself.

    Attributes:
        config: the whole config (``verifier``, ``linearize``, ``llm``, ...).
        model_path: the NLI checkpoint the config loads (``verifier.trained.trained_verifier_path``).
        mix_model_path: ``verifier.mix_weight``'s second checkpoint; "" without a mix.
        llm_client: makes (once) and returns the pipeline's loaded LLM client, so that only a
            component that asks for it makes one.
        two_way_data: whether the dataset has 2-way labels (HoVer).
        pair_memories: the pool of scored NLI pairs the NLI verifiers take their memory from
            (:mod:`verifier.pair_memory`); None: each its own.
    """

    config: Config
    model_path: str
    mix_model_path: str
    llm_client: Callable[[], LLMClient]
    two_way_data: bool
    pair_memories: PairMemories | None = None


VerifierFactory = Callable[[VerifierContext], Verifier]


def _nli(ctx: VerifierContext) -> Verifier:
    """The NLI classifier (per-sentence with its claim aggregator, or concat), mixed with a second
    one where ``verifier.mix_weight`` > 0."""
    from verifier.nli import NLIVerifier

    cfg = ctx.config
    nli = NLIVerifier(cfg.verifier, ctx.model_path, ctx.pair_memories)
    if cfg.verifier.mix_weight <= 0:
        return nli
    from verifier.mixed import MixedVerifier
    from verifier.trained import mix_verifier_config

    # both loaded first: the mix refuses a verifier whose loaded aggregation gives no probabilities
    second = NLIVerifier(mix_verifier_config(cfg).verifier, ctx.mix_model_path, ctx.pair_memories)
    return MixedVerifier(nli.load(), second.load(), cfg.verifier.mix_weight)


def _llm(ctx: VerifierContext) -> Verifier:
    """The chat model's cited verdict, with the NLI component deciding where its reply is unusable."""
    from verifier.llm import LLMVerifier

    cfg = ctx.config
    return LLMVerifier(
        ctx.llm_client(),
        fallback=_nli(ctx),
        max_evidence=cfg.linearize.max_facts,
        triplets_per_fact=cfg.linearize.triplets_per_fact,
    )


_FACTORIES: dict[str, tuple[VerifierFactory, tuple[str, ...]]] = {
    "nli": (_nli, ("torch", "transformers")),
    "llm": (_llm, ("torch", "transformers")),
}


def register_verifier(name: str, factory: VerifierFactory, modules: tuple[str, ...] = ()) -> None:
    """Add a verifier component that configs can then name in ``pipeline.verifier``.

    Args:
        name: its name (letters, digits, ``_`` and ``-``); garag's own names are taken.
        factory: ``ctx -> verifier`` (:class:`VerifierContext`); :func:`build_verifier` loads it.
        modules: Python modules it needs, checked before ``factory`` runs for an install hint.

    Raises:
        ValueError: a bad or taken name.
    """
    check_component_name("verifier", name, VERIFIERS)
    _FACTORIES[name] = (factory, tuple(modules))
    register_verifier_name(name)


def available() -> list[str]:
    """Names of all registered verifiers."""
    return list(known_verifiers())


def build_verifier(name: str, ctx: VerifierContext) -> Verifier:
    """The verifier component called ``name``, built and loaded.

    Raises:
        garag.config.ConfigError: unknown name (one line naming ``pipeline.verifier``).
        ImportError: an optional dependency is missing, with the pip command to fix it.
    """
    if name not in _FACTORIES:
        known = ", ".join(available())
        raise ConfigError(f"pipeline.verifier: unknown verifier (known: {known}), got {name!r}")
    factory, modules = _FACTORIES[name]
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as e:
            raise ImportError(
                f"verifier {name!r} needs the Python module {module!r}: pip install garag"
            ) from e
    return factory(ctx).load()
