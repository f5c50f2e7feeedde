"""Citation checking: out-of-range numbers and uncited sentences are flagged."""

from core.citations import check_citations, cited_numbers, find_quote, split_answer_sentences


def test_out_of_range_citation_is_flagged():
    rep = check_citations("The Act was signed on October 28, 1998 [1]. It has five titles [7].", n_sources=5)
    assert rep.invalid_numbers == [7]
    assert not rep.ok


def test_uncited_sentence_is_flagged():
    rep = check_citations("The Act was signed in 1998 [1]. It also created a new hull protection right.", 3)
    assert rep.uncited_sentences == ["It also created a new hull protection right."]
    assert not rep.ok


def test_valid_answer_passes():
    rep = check_citations("Signed October 28, 1998 [1][2]. Ten years of protection [3].", 3)
    assert rep.ok and rep.cited == [1, 2, 3]


def test_parsing_helpers():
    assert cited_numbers("a [1] b [2, 3]") == [1, 2, 3]
    assert split_answer_sentences("One thing. [1] Two things [2].") == ["One thing. [1]", "Two things [2]."]
    text = "protection continues for ten\nyears from the date"
    assert find_quote("continues for ten years", text) == text.index("continues")
    assert find_quote("twelve years", text) == -1
