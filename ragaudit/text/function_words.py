"""English function words: the stop words term matching ignores and the auxiliary verbs that
end a question's wh-phrase.

``STOP_WORDS``: articles, pronouns, prepositions, conjunctions, auxiliaries and wh-words that BM25
(``ragaudit.index.sparse.tokenize``), the answerability gate, the answerers, citation checking
and gold-question checks leave out when they compare the words of two texts. ``AUXILIARY_VERBS``:
forms of "be", "do", "have" and the modals (with the negated contractions questions use), which
close the noun phrase a "What/Which X ... <auxiliary>" question asks for; ``AUXILIARY`` is the
same list as a regular-expression alternation (use it between word boundaries).
``QUESTION_WORDS``: the words that phrase a question or a request rather than name what it is
about (wh-words, auxiliaries, "according", "please", "give", "list" ...).
"""

from __future__ import annotations

STOP_WORDS = frozenset(
    """a an and are as at be by for from has have in is it its of on or that the this to was were will
    with what which who whom whose when where why how did do does i me my we our you your he she they them
    their there these those than then so such not no can could would should may might been being into
    about over under after before during if any all each other some only own same too very s t just""".split()
)

AUXILIARY_VERBS = (
    "is",
    "are",
    "was",
    "were",
    "do",
    "does",
    "did",
    "has",
    "have",
    "had",
    "can",
    "could",
    "will",
    "would",
    "should",
    "shall",
    "must",
    "may",
    "might",
    "isn't",
    "aren't",
    "wasn't",
    "weren't",
    "doesn't",
    "didn't",
)
AUXILIARY = "(?:" + "|".join(AUXILIARY_VERBS) + ")"

# words that phrase a question or a request ("What is ...", "According to ...", "Please list ...")
QUESTION_WORDS = frozenset(
    {
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "when",
        "where",
        "why",
        "how",
        "is",
        "are",
        "was",
        "were",
        "do",
        "does",
        "did",
        "can",
        "could",
        "would",
        "should",
        "will",
        "according",
        "in",
        "on",
        "for",
        "if",
        "the",
        "a",
        "an",
        "i",
        "my",
        "give",
        "list",
        "tell",
        "please",
        "explain",
        "describe",
        "to",
    }
)
