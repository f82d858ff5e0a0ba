"""Greedy replies to many chats at once on one llama.cpp context, a sequence each (and, reading
the prompts only, the logits of their first reply token: ``BatchDecoder.first_logits``).

On CPU a token step reads every weight once whatever the number of sequences it
advances, so stepping 8 replies together is far cheaper than 8 steps: Qwen2.5-Coder-1.5B
wrote the programs of 30 HoVer tune claims in 2.54 s each instead of 4.19 s on 2 cores
(``benchmarks/results/program_speed.md``).  The prompts' common prefix (a few-shot
prompt's system turn and examples) is read once, kept between calls, and shared by every
sequence (``llama_memory_seq_cp`` shares the cells of a unified cache).

llama-cpp-python's high-level ``Llama`` decodes one sequence; this drives its low-level
API (``llama_batch``, ``llama_decode``, ``llama_memory_seq_*``) on a second context over the
same loaded weights, with the ``Llama``'s own context settings.  Greedy decoding only.  A
chat decoded alone is the same text as ``create_chat_completion``'s at temperature 0; in a
batch, a matrix product over several sequences rounds differently and greedy paths can
part (24 of those 30 programs were the same), so a reply can depend on its batch.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from garag.llm.base import lines_begun


@dataclass(frozen=True)
class BatchReply:
    """One sequence's reply: text, token counts and why it ended ("stop", "length", "lines", "timeout")."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish: str


class BatchDecoder:
    """Greedy generation (or first-token logits) for up to ``n_seq`` chats at a time.

    Args:
        llama: a loaded ``llama_cpp.Llama`` (its weights, tokenizer and chat template are used).
        n_seq: sequences decoded together.
        n_ctx: cells of the unified cache shared by the prefix and every sequence.
        n_threads: CPU threads.

    Raises:
        ValueError: the model has no chat template in its GGUF metadata.
    """

    def __init__(self, llama: Any, n_seq: int, n_ctx: int, n_threads: int) -> None:
        import llama_cpp
        from llama_cpp import _internals
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        template = llama.metadata.get("tokenizer.chat_template")
        if not template:
            raise ValueError(
                "batched generation needs the model's chat template (GGUF tokenizer.chat_template)"
            )
        if llama.chat_handler is not None or llama.chat_format != "chat_template.default":
            # Llama formats chats with a built-in formatter when the template is a known one
            raise ValueError(f"the model's chats are formatted as {llama.chat_format!r}, not by its template")
        eos, bos = llama.token_eos(), llama.token_bos()
        model = llama._model  # the loaded weights, shared with the Llama's own context
        self._format = Jinja2ChatFormatter(
            template=template,
            eos_token=model.token_get_text(eos) if eos != -1 else "",
            bos_token=model.token_get_text(bos) if bos != -1 else "",
            stop_token_ids=[eos],
        )
        self._lib = llama_cpp
        self._llama = llama
        self._vocab = llama_cpp.llama_model_get_vocab(model.model)
        self.n_seq = n_seq
        self.n_ctx = n_ctx
        # the Llama's own context settings (flash attention off, batch sizes, cache types), so a
        # reply decoded alone here is the one create_chat_completion gives; a sequence each
        params = llama_cpp.llama_context_params.from_buffer_copy(llama.context_params)
        params.n_ctx = n_ctx
        params.n_seq_max = n_seq
        params.kv_unified = True
        params.n_threads = params.n_threads_batch = n_threads
        self._ctx = _internals.LlamaContext(model=model, params=params, verbose=False)
        self._batch = _internals.LlamaBatch(n_tokens=512, embd=0, n_seq_max=n_seq, verbose=False)
        self._n_vocab = llama.n_vocab()
        self._held: list[int] = []  # the prefix sequence 0 holds at positions 0..len-1

    def close(self) -> None:
        self._batch.close()
        self._ctx.close()

    def tokens(self, messages: Sequence[dict[str, str]]) -> tuple[list[int], list[str]]:
        """The chat as prompt tokens (the model's template, generation prompt added) and its stop strings."""
        formatted = self._format(messages=list(messages))
        stop = (
            formatted.stop if isinstance(formatted.stop, list) else [formatted.stop] if formatted.stop else []
        )
        return self._llama.tokenize(formatted.prompt.encode("utf-8"), add_bos=False, special=True), stop

    def generate(
        self,
        chats: Sequence[Sequence[dict[str, str]]],
        max_tokens: int,
        max_lines: int | None = None,
        timeout_s: float | None = None,
    ) -> list[BatchReply]:
        """Replies to ``chats`` (lists of ``{"role", "content"}``), in order, ``n_seq`` at a time.

        A reply ends at an end-of-generation token or a stop string ("stop"), at ``max_tokens``
        ("length"), once it has begun more than ``max_lines`` lines ("lines"), or when
        ``timeout_s`` has passed since its group started ("timeout").

        Raises:
            ValueError: one prompt and its reply do not fit the context.
        """
        out: list[BatchReply] = []
        for group in self._groups([self.tokens(c) for c in chats], max_tokens):
            out.extend(
                self._guarded(lambda group=group: self._group(group, max_tokens, max_lines, timeout_s))
            )
        return out

    def _groups(
        self, prompts: list[tuple[list[int], list[str]]], max_tokens: int
    ) -> Iterator[list[tuple[list[int], list[str]]]]:
        """The prompts in order, in groups of at most ``n_seq`` that fit the context with a reply of
        ``max_tokens`` each.

        Raises:
            ValueError: one prompt and its reply do not fit the context.
        """
        start = 0
        while start < len(prompts):
            end = min(start + self.n_seq, len(prompts))
            while end > start + 1 and not self._fits(prompts[start:end], max_tokens):
                end -= 1
            if not self._fits(prompts[start:end], max_tokens):
                size = len(prompts[start][0])
                reply = f" and a reply of {max_tokens} do not fit" if max_tokens else " does not fit"
                raise ValueError(f"a prompt of {size} tokens{reply} llm.n_ctx {self.n_ctx}")
            yield prompts[start:end]
            start = end

    def _fits(self, group: Sequence[tuple[list[int], list[str]]], max_tokens: int) -> bool:
        k = _common_prefix([t for t, _ in group])
        return k + sum(len(t) - k + max_tokens for t, _ in group) <= self.n_ctx

    def _decode(self, entries: Sequence[tuple[int, int, int, bool]]) -> None:
        """One ``llama_decode`` of (token, position, sequence, wants logits) entries (at most 512)."""
        b = self._batch.batch
        b.n_tokens = len(entries)
        for i, (tok, pos, seq, logits) in enumerate(entries):
            b.token[i] = tok
            b.pos[i] = pos
            b.seq_id[i][0] = seq
            b.n_seq_id[i] = 1
            b.logits[i] = logits
        self._ctx.decode(self._batch)

    def _read(
        self, entries: Sequence[tuple[int, int, int]], pick: Callable[[np.ndarray], Any]
    ) -> dict[int, Any]:
        """Decode (token, position, sequence) entries, 512 a call; ``pick`` of each sequence's logits
        after its last entry."""
        last = {seq: n for n, (_, _, seq) in enumerate(entries)}
        wants = set(last.values())
        out: dict[int, Any] = {}
        for s in range(0, len(entries), 512):
            chunk = entries[s : s + 512]
            self._decode([(tok, pos, seq, s + i in wants) for i, (tok, pos, seq) in enumerate(chunk)])
            for i, (_, _, seq) in enumerate(chunk):
                if s + i in wants:
                    out[seq] = pick(self._logits(i))
        return out

    def _logits(self, i: int) -> np.ndarray:
        """The logits of the i-th entry of the last decode (a view: read it before the next one)."""
        return np.ctypeslib.as_array(self._lib.llama_get_logits_ith(self._ctx.ctx, i), shape=(self._n_vocab,))

    def _argmax(self, i: int) -> int:
        return _argmax(self._logits(i))

    def first_logits(
        self, chats: Sequence[Sequence[dict[str, str]]], token_ids: Sequence[int]
    ) -> list[list[float]]:
        """For each chat, the logits of ``token_ids`` as the reply's first token (nothing is
        generated), ``n_seq`` chats at a time: chats that share a prefix (one system turn and
        evidence, several questions) read it once.

        Raises:
            ValueError: a prompt does not fit the context.
        """
        ids = list(token_ids)
        out: list[list[float]] = []
        for group in self._groups([self.tokens(c) for c in chats], 0):
            toks = [t for t, _ in group]
            out.extend(
                self._guarded(
                    lambda toks=toks: self._read_prompts(toks, lambda x: [float(x[i]) for i in ids])
                )
            )
        return out

    def _guarded(self, call: Callable[[], Any]) -> Any:
        """``call()``; a failed decode leaves cells half written: then drop them all."""
        try:
            return call()
        except BaseException:
            self._lib.llama_memory_clear(self._lib.llama_get_memory(self._ctx.ctx), True)
            self._held = []
            raise

    def _read_prompts(self, toks: Sequence[list[int]], pick: Callable[[np.ndarray], Any]) -> list[Any]:
        """Read a group's prompts, a sequence each; ``pick`` of each one's logits after its prompt.

        Sequence 0 reads its whole prompt past what it already holds, 512 tokens a decode, as
        create_chat_completion does (so a chat decoded alone gets the same reply), then lends the
        shared prefix to the others, which read the rest of theirs together."""
        lib = self._lib
        mem = lib.llama_get_memory(self._ctx.ctx)
        k = _common_prefix(toks)
        out: list[Any] = [None] * len(toks)
        j = min(_lcp([self._held, toks[0]]), len(toks[0]) - 1)
        if not lib.llama_memory_seq_rm(mem, 0, j, -1):  # a cache that cannot cut there: start over
            lib.llama_memory_clear(mem, True)
            j = 0
        self._held = toks[0][:j]  # what sequence 0 holds until its prompt is read
        for seq in range(1, self.n_seq):
            lib.llama_memory_seq_rm(mem, seq, -1, -1)
        out[0] = self._read([(tok, j + i, 0) for i, tok in enumerate(toks[0][j:])], pick)[0]
        self._held = toks[0]
        for seq in range(1, len(toks)):
            lib.llama_memory_seq_cp(mem, 0, seq, 0, k)
        rest = [(tok, k + i, seq) for seq, t in enumerate(toks) if seq for i, tok in enumerate(t[k:])]
        for seq, x in self._read(rest, pick).items():
            out[seq] = x
        return out

    def _group(
        self,
        group: Sequence[tuple[list[int], list[str]]],
        max_tokens: int,
        max_lines: int | None,
        timeout_s: float | None,
    ) -> list[BatchReply]:
        lib = self._lib
        started = time.monotonic()
        toks = [t for t, _ in group]
        nxt: list[int] = self._read_prompts(toks, _argmax)
        pos = [len(t) for t in toks]
        made: list[list[int]] = [[] for _ in group]
        finish = [""] * len(group)
        active = list(range(len(group)))
        while active:
            timed_out = timeout_s is not None and time.monotonic() - started > timeout_s
            still = []
            for seq in active:
                tok = nxt[seq]
                if lib.llama_vocab_is_eog(self._vocab, tok):
                    finish[seq] = "stop"
                    continue
                made[seq].append(tok)
                text = _text(self._llama, made[seq])
                if any(s and s in text for s in group[seq][1]):
                    finish[seq] = "stop"
                elif max_lines is not None and lines_begun(text) > max_lines:
                    finish[seq] = "lines"
                elif len(made[seq]) >= max_tokens:
                    finish[seq] = "length"
                elif timed_out:
                    finish[seq] = "timeout"
                else:
                    still.append(seq)
            active = still
            if active:
                self._decode([(nxt[seq], pos[seq], seq, True) for seq in active])
                for i, seq in enumerate(active):
                    nxt[seq] = self._argmax(i)
                    pos[seq] += 1
        replies = []
        for seq, (t, stop) in enumerate(group):
            text = _text(self._llama, made[seq])
            for s in stop:
                if s and s in text:
                    text = text[: text.index(s)]
            replies.append(BatchReply(text, len(t), len(made[seq]), finish[seq]))
        return replies


def _argmax(logits: np.ndarray) -> int:
    return int(np.argmax(logits))


def _text(llama: Any, tokens: list[int]) -> str:
    return llama.detokenize(tokens).decode("utf-8", errors="ignore")


def _lcp(seqs: Sequence[Sequence[int]]) -> int:
    """Length of the longest common prefix."""
    shortest = min((len(s) for s in seqs), default=0)
    k = 0
    while k < shortest and all(s[k] == seqs[0][k] for s in seqs):
        k += 1
    return k


def _common_prefix(prompts: Sequence[Sequence[int]]) -> int:
    """The prompts' shared prefix, kept one short of the shortest (each sequence decodes at least its
    last prompt token itself, which gives its first logits)."""
    return max(0, min(_lcp(prompts), min(len(p) for p in prompts) - 1))
