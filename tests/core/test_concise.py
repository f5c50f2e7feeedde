"""Concise answers (issue 12, item 7): the span answering the question's type, no gold involved."""

import pytest

from core.answer import ExtractiveAnswerer, LLMAnswerer
from core.concise import concise_span, question_type
from core.retrieval import RetrievedChunk

CASES = [  # (question, sentence, expected type, expected span) -- sentences as the dev PDFs print them
    ("On what date was the Digital Millennium Copyright Act signed into law?",
     "The DMCA was signed into law by President Clinton on October 28, 1998.", "date", "October 28, 1998"),
    ("If I file to protect the shape of my boat's hull, for how long am I covered?",
     "Once registered, protection continues for ten years from the date protection begins.", "duration", "ten years"),
    ("How much net revenue did iPhone generate in the three months covered by this report?",
     "iPhone $ 39,669 $ 40,665 (2)% $ 156,778", "money", "$ 39,669"),
    ("What effective tax rate did Apple report for the third quarter of fiscal 2023?",
     "The Company's effective tax rate for the third quarter of 2023 was 12.5%, compared to the statutory "
     "federal income tax rate of 21%.", "percent", "12.5%"),
    ("What is Apple Inc.'s IRS Employer Identification Number?", "California 94-2404110", "identifier",
     "94-2404110"),
    ("What is the NTSB accident number of the December 2007 accident in Tallahassee, Florida?",
     "NTSB Identification: NYC08CA055 14 CFR Part 91: General Aviation", "identifier", "NYC08CA055"),
    ("Which library does DPR use to index the passage embeddings offline?",
     "We use FAISS (Johnson et al., 2017) for indexing dense representations.", "name", "FAISS"),
    ("How much did Apple spend buying back its own stock in the third quarter of fiscal 2023?",
     "the Company repurchased $18.0 billion of its common stock and paid dividends of $3.8 billion.", "money",
     "$18.0 billion"),
    ("Who was the NTSB investigator in charge of this accident?",
     "Investigator In Charge (IIC): Tealeye C Cornejo", "name", "Tealeye C Cornejo"),
]


@pytest.mark.parametrize("question,sentence,typ,span", CASES)
def test_concise_span_answers_the_question_type(question, sentence, typ, span):
    """Fails if the question's answer type is misread or the span of that type nearest the
    question's terms (a form field's value after its colon first) is not the one returned."""
    assert question_type(question) == typ
    assert concise_span(question, sentence) == span


def test_no_span_without_a_type_or_a_candidate():
    """Fails if a span is invented for a why-question or for a sentence without a value of the type."""
    assert question_type("Why did HP decide to run KServe without Knative?") is None
    assert concise_span("Why did HP decide to run KServe without Knative?", "Knative was too heavy.") is None
    assert concise_span("On what date was it signed?", "It was signed by the President.") is None


def _chunk(n, text):
    return RetrievedChunk(rank=n, chunk_id=f"c{n}", score=1.0 / n,
                          payload={"text": text, "doc_name": "dmca.pdf", "page_start": 1, "page_end": 1,
                                   "page_breaks": [[1, 0]]})


def test_answerers_return_their_own_concise_answer(embedder):
    """Fails if the extractive answerer's ``concise`` is not the typed span of its best sentence
    (quoted sentence kept whole in ``answer``), or the LLM answerer's is not taken from its reply."""
    src = [_chunk(1, "The DMCA was signed into law by President Clinton on October 28, 1998. It has five titles."),
           _chunk(2, "Once registered, protection continues for ten years from the date protection begins.")]
    res = ExtractiveAnswerer(embedder).answer("When was the DMCA signed into law?", src)
    assert res.label == "answered" and res.concise == "October 28, 1998"
    assert "signed into law by President Clinton on October 28, 1998" in res.answer
    llm = LLMAnswerer("gpt-4o-mini", mock_response="Protection lasts ten years from the date it begins [2].")
    assert llm.answer("For how long does protection last?", src).concise == "ten years"
