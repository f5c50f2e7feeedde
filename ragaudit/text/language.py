"""The language a document or a question is written in, when it is not English.

``detect_language`` uses langdetect (Shuyo 2010: naive Bayes over character n-grams; its profiles
ship with the package), seeded so the same text always gets the same answer; ``non_english``
reads it more loosely, for whether a text is English at all. BM25 adds a
language's own stems (``ragaudit.index.sparse.language_terms``); the anchors of a question read
capitalised words as names only in a language that does not capitalise its nouns
(``ragaudit.text.anchors``).
"""

from __future__ import annotations

import re
from functools import lru_cache

MIN_PROBABILITY = 0.9
SAMPLE_CHARS = 4000
# words only English writes: a question holding one is English (no detection)
_ENGLISH_ONLY = re.compile(
    r"(?i)\b(?:the|what|which|who|whom|whose|how|when|where|why|did|does|were|are|of|and|with|from|"
    r"this|that|many|much)\b"
)


@lru_cache(maxsize=4096)
def _languages(text: str) -> tuple[tuple[str, float], ...]:
    """langdetect's ``(language, probability)`` pairs for the first ``SAMPLE_CHARS`` characters of
    ``text``, most probable first; () when there is too little to read (fewer than three words) or
    a question-length text (up to 400 characters) holds an English-only function word ("the",
    "what", "how", ...): English without detection."""
    sample = text[:SAMPLE_CHARS]
    if len(re.findall(r"[^\W\d_]{2,}", sample)) < 3 or (len(sample) <= 400 and _ENGLISH_ONLY.search(sample)):
        return ()
    # deferred: langdetect loads its language profiles (about 0.5 s) when first used
    from langdetect import DetectorFactory, LangDetectException, detect_langs

    DetectorFactory.seed = 0
    try:
        return tuple((x.lang, x.prob) for x in detect_langs(sample))
    except LangDetectException:  # no letters it can read
        return ()


def detect_language(text: str) -> str | None:
    """ISO 639-1 code of the language of ``text`` when it is not English and is detected with
    probability >= ``MIN_PROBABILITY`` (``_languages``); else None (English, too short, or
    uncertain)."""
    langs = _languages(text)
    return langs[0][0] if langs and langs[0][0] != "en" and langs[0][1] >= MIN_PROBABILITY else None


def non_english(text: str) -> str | None:
    """The most probable language of ``text`` (ISO 639-1, as langdetect names it: "de", "zh-cn")
    when the languages other than English together have probability >= ``MIN_PROBABILITY``
    (``_languages``); else None. Looser than ``detect_language``: a Chinese page that langdetect
    splits between "zh-cn" (0.86) and "ko" (0.14) is not English, though neither language is
    certain."""
    other = [(lang, p) for lang, p in _languages(text) if lang != "en"]
    return other[0][0] if other and sum(p for _, p in other) >= MIN_PROBABILITY else None
