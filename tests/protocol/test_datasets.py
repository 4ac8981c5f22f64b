"""Tests of protocol/studies/datasets.py (embedded English, OOV, Zipf, user files)."""
from __future__ import annotations

import re

import numpy as np
import pytest

from protocol.studies.datasets import (
    DICTIONARY_SIZE, EN_ALPHABET, OOV_ALPHABET, DatasetError, Population, english,
    english_oov, from_user_words, load_dataset, load_file, oov_vocabulary, zipf,
    zipf_vocabulary,
)


def _words_of(pop: Population) -> list[str]:
    return [pop.vocabulary[i] for i in pop.items]


def test_english_single_word_reproducible_and_over_alphabet() -> None:
    a = english(5000, np.random.default_rng(1))
    b = english(5000, np.random.default_rng(1))
    c = english(5000, np.random.default_rng(2))
    assert a.n == 5000 and a.single_word
    assert np.array_equal(a.items, b.items) and not np.array_equal(a.items, c.items)
    assert all(set(w) <= set(EN_ALPHABET) and w for w in a.vocabulary)
    assert a.top(3) == ["the", "to", "and"] or a.top(1) == ["the"]
    # ground truth: holders are the user counts, frequency = holders / n
    h = a.holders()
    assert h.sum() == 5000
    assert np.allclose(a.frequency(), h / 5000)
    assert a.ranking()[0] == int(np.argmax(h))


def test_english_multi_word() -> None:
    p = english(3000, np.random.default_rng(4), multi_word=True)
    assert p.n == 3000 and not p.single_word
    assert p.counts.min() >= 1 and p.words_per_user.min() >= 1
    assert p.frequency().sum() == pytest.approx(1.0)
    # entries of a user are distinct words (occurrences are aggregated into counts)
    for i in range(50):
        row = p.items[p.offsets[i]:p.offsets[i + 1]]
        assert np.unique(row).size == row.size
    assert p.occurrences().sum() == p.counts.sum()


def test_oov_definition() -> None:
    vocab, f = oov_vocabulary()
    assert len(vocab) > 100_000 and (f > 0).all()
    assert "it's" in vocab and "the" not in vocab and "2nd" in vocab
    assert all(set(w) <= set(OOV_ALPHABET) and "0" not in w for w in vocab)
    import wordfreq

    alpha = re.compile(r"[a-z]+")
    freq = wordfreq.get_frequency_dict("en", "large")
    ranked = sorted((w for w in freq if "0" not in w), key=lambda w: (-freq[w], w))
    dictionary = [w for w in ranked if alpha.fullmatch(w)][:DICTIONARY_SIZE]
    assert not set(dictionary) & set(vocab)
    pop = english_oov(2000, np.random.default_rng(0))
    assert pop.name == "en-oov" and set(_words_of(pop)) <= set(vocab)


def test_zipf() -> None:
    v1, v2 = zipf_vocabulary(500), zipf_vocabulary(500)
    assert v1 == v2 and len(set(v1)) == 500  # public, fixed vocabulary
    p = zipf(50_000, np.random.default_rng(3), vocab_size=500, exponent=1.2)
    h = p.holders()
    expected0 = 50_000 / np.sum(np.arange(1, 501) ** -1.2)
    # rank-1 word: binomial count within 6 sigma (failure probability ~1e-9)
    assert abs(h[0] - expected0) < 6 * np.sqrt(expected0)
    assert p.top(1) == [v1[0]]
    with pytest.raises(DatasetError):
        zipf(10, np.random.default_rng(0), exponent=0)
    with pytest.raises(DatasetError):
        zipf(0, np.random.default_rng(0))


def test_from_user_words_drops_foreign_words() -> None:
    p = from_user_words("t", [["ab", "ab", "c!"], ["ba"], ["!!"]], "abc")
    assert p.n == 3 and p.dropped == 2
    assert p.words_per_user.tolist() == [1, 1, 0]
    assert p.counts.tolist() == [2, 1]
    assert p.frequency().tolist() == pytest.approx([1 / 3, 1 / 3])
    with pytest.raises(DatasetError, match="alphabet"):
        from_user_words("t", [["a"]], "a$")


def test_load_text_and_csv(tmp_path) -> None:
    t = tmp_path / "users.txt"
    t.write_text("hello world\n\nhello\n  hi hi  \n", encoding="utf-8")
    p = load_file(t)
    assert p.n == 3  # blank line skipped
    assert p.top(1) == ["hello"]
    c = tmp_path / "users.csv"
    c.write_text("user,item\nu1,apple\nu2,pear\nu1,apple\nu3,apple\n", encoding="utf-8")
    q = load_file(c)
    assert q.n == 3 and q.top(2) == ["apple", "pear"]
    assert q.counts.tolist() == [2, 1, 1]


@pytest.mark.parametrize("content, suffix, msg", [
    ("a,b,c\n", ".csv", "expected 2 fields"),
    ("user,item\n,x\n", ".csv", "empty user or item"),
    ("\n\n", ".txt", "no users"),
    ("user,item\n", ".csv", "no users"),
])
def test_malformed_files(tmp_path, content: str, suffix: str, msg: str) -> None:
    f = tmp_path / f"bad{suffix}"
    f.write_text(content, encoding="utf-8")
    with pytest.raises(DatasetError, match=msg):
        load_file(f)


def test_file_errors(tmp_path) -> None:
    with pytest.raises(DatasetError, match="not found"):
        load_file(tmp_path / "missing.txt")
    with pytest.raises(DatasetError, match="not a file"):
        load_file(tmp_path)
    b = tmp_path / "latin1.txt"
    b.write_bytes(b"caf\xe9\n")
    with pytest.raises(DatasetError, match="UTF-8"):
        load_file(b)
    with pytest.raises(DatasetError, match="unknown dataset"):
        load_dataset("no-such-dataset", 10, np.random.default_rng(0))


def test_load_dataset_file_modes(tmp_path) -> None:
    f = tmp_path / "u.txt"
    f.write_text("a b\nc\nd\ne\n", encoding="utf-8")
    with pytest.raises(DatasetError, match="--multi-word"):
        load_dataset(str(f), None, np.random.default_rng(0))
    p = load_dataset(str(f), None, np.random.default_rng(0), multi_word=True)
    assert p.n == 4
    s = load_dataset(str(f), 2, np.random.default_rng(0), multi_word=True)
    assert s.n == 2 and set(_words_of(s)) <= {"a", "b", "c", "d", "e"}
    with pytest.raises(DatasetError, match="cannot take"):
        load_dataset(str(f), 9, np.random.default_rng(0), multi_word=True)
    g = tmp_path / "one.txt"
    g.write_text("x\ny\ny\n", encoding="utf-8")
    assert load_dataset(str(g), None, np.random.default_rng(0)).single_word


def test_population_validation() -> None:
    with pytest.raises(DatasetError, match="CSR"):
        Population("x", ("a",), np.array([0, 2]), np.array([0]), np.array([1]), "a")
    with pytest.raises(DatasetError, match="vocabulary"):
        Population("x", ("a",), np.array([0, 1]), np.array([3]), np.array([1]), "a")
    with pytest.raises(DatasetError, match="counts"):
        Population("x", ("a",), np.array([0, 1]), np.array([0]), np.array([0]), "a")


def test_compact_keeps_users_and_truth() -> None:
    p = english(2000, np.random.default_rng(8))
    c = p.compact()
    assert len(c.vocabulary) == np.unique(p.items).size < len(p.vocabulary)
    assert _words_of(c) == _words_of(p)
    assert c.top(20) == p.top(20)
    assert np.allclose(np.sort(c.frequency()), np.sort(p.frequency()[p.frequency() > 0]))
