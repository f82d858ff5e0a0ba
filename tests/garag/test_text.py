from __future__ import annotations

import pytest

from garag.text import detokenize, normalize_title, page_to_title, title_to_page


@pytest.mark.parametrize(
    "raw, expected",
    [
        (
            "John Lennon -LRB- 9 October 1940 -RRB- was a singer .",
            "John Lennon (9 October 1940) was a singer.",
        ),
        ("Katherine `` Tilda '' Swinton is an actress .", 'Katherine "Tilda" Swinton is an actress.'),
        ("The group 's best-known line-up .", "The group's best-known line-up."),
        ("1940 -- 1980", "1940 \u2013 1980"),
        ("It does n't , really : no !", "It doesn't, really: no!"),
        ("Plain text stays.", "Plain text stays."),
    ],
)
def test_detokenize(raw: str, expected: str):
    assert detokenize(raw) == expected


def test_titles():
    assert page_to_title("Liverpool_-LRB-band-RRB-") == "Liverpool (band)"
    assert normalize_title("Liverpool_-LRB-band-RRB-") == "liverpool"
    assert normalize_title("Liverpool_-LRB-band-RRB-", strip_disambiguation=False) == "liverpool (band)"
    assert normalize_title("Star_Wars-COLON-_The_Force") == "star wars: the force"


@pytest.mark.parametrize(
    ("title", "page"),
    [
        ("Titanic (1997 film)", "Titanic_-LRB-1997_film-RRB-"),
        ("Married... with  Children", "Married..._with_Children"),
        ("Star Wars: Episode I", "Star_Wars-COLON-_Episode_I"),
    ],
)
def test_titles_map_back_to_page_ids(title: str, page: str):
    assert title_to_page(title) == page
    assert page_to_title(page) == " ".join(title.split())
