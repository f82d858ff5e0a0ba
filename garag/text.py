"""Text normalisation: FEVER's PTB tokens, page titles."""

from __future__ import annotations

import re
import unicodedata

_PTB_BRACKETS = {
    "-LRB-": "(",
    "-RRB-": ")",
    "-LSB-": "[",
    "-RSB-": "]",
    "-LCB-": "{",
    "-RCB-": "}",
    "-COLON-": ":",
}
_BRACKET_RE = re.compile("|".join(re.escape(k) for k in _PTB_BRACKETS))
_DISAMBIG_RE = re.compile(r"\s*\((?:[^()]*)\)\s*$")


def detokenize(text: str) -> str:
    """Undo FEVER's PTB tokenisation for model inputs and display.

    ``-LRB-`` -> ``(``, two backticks or two apostrophes -> ``"``, `` 's`` -> ``'s``,
    `` -- `` -> an en dash, and spaces before punctuation removed.  Ids and
    scoring never use this: they keep FEVER's raw page titles.
    """
    text = _BRACKET_RE.sub(lambda m: _PTB_BRACKETS[m.group(0)], text)
    text = text.replace("``", '"').replace("''", '"')
    text = text.replace(" -- ", " \u2013 ")
    # Clitics split off by the tokenizer: "someone 's" -> "someone's", "do n't" -> "don't".
    text = re.sub(r" (['\u2019](?:s|S|re|ve|ll|d|m|t)\b)", r"\1", text)
    text = re.sub(r" (n't)\b", r"\1", text)
    text = re.sub(r"([(\[{]) ", r"\1", text)
    text = re.sub(r" ([)\]},.;:!?%])", r"\1", text)
    # Quotes: join the inside of a pair of double quotes to its content.
    text = re.sub(r'"\s+([^"]*?)\s+"', r'"\1"', text)
    return re.sub(r"\s{2,}", " ", text).strip()


def page_to_title(page_id: str) -> str:
    """FEVER page id -> readable title: underscores to spaces, PTB brackets back."""
    return _BRACKET_RE.sub(lambda m: _PTB_BRACKETS[m.group(0)], page_id.replace("_", " "))


_TITLE_BRACKETS = {v: k for k, v in _PTB_BRACKETS.items() if k.startswith("-")}


def title_to_page(title: str) -> str:
    """Readable title -> FEVER page id (``page_to_title``'s inverse): spaces to underscores,
    brackets to PTB tokens."""
    return "".join(_TITLE_BRACKETS.get(ch, ch) for ch in "_".join(title.split()))


def normalize_title(page_id: str, strip_disambiguation: bool = True) -> str:
    """Normalised key for title matching.

    ``Liverpool_-LRB-band-RRB-`` -> ``liverpool`` (with the disambiguation part
    stripped), Unicode NFKC, case folded, runs of spaces collapsed.
    """
    title = page_to_title(page_id)
    if strip_disambiguation:
        title = _DISAMBIG_RE.sub("", title)
    title = unicodedata.normalize("NFKC", title).casefold()
    return re.sub(r"\s+", " ", title).strip()
