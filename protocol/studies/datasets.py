"""Populations of users holding words: embedded English, out-of-vocabulary English,
synthetic Zipf, and the user's own files.

Theory of operation
-------------------
A :class:`Population` is a sparse user x word matrix in CSR form: user ``i`` holds
the words ``vocabulary[items[offsets[i]:offsets[i+1]]]`` with local counts
``counts[offsets[i]:offsets[i+1]]``. One word per user (TrieHH Algorithm 1) is the
case where every user has exactly one entry. The ground truth is derived from the
same arrays: the number of users holding each word (single word), and the
population frequency ``F(w) = (1/n) sum_i c_i(w) / sum_v c_i(v)`` of Zhu et al.
(section 5, multiple words), which equals holders/n in the single-word case.

Every population declares a public ``alphabet`` (single characters, never ``$``,
which TrieHH uses as end-of-sequence). For the embedded datasets, words with a
character outside the alphabet are dropped from the vocabulary before sampling. In a
file, such a word is an error naming the file, line and word; with
``drop_unencodable`` it is dropped and counted in ``Population.dropped``, and a user
left without a word is removed (counted in the description), so a one-word-per-user
file never silently becomes a population with users holding no word (which would
change the theorem that applies). Dropping rather than mapping to an "other" symbol
keeps every word the mechanism can release a real word of the population.

Embedded datasets (offline after ``pip install``, from the ``wordfreq`` package,
Speer et al., English ``large`` list: about 321,000 words with frequency >= 1e-8):

* ``en``: words over ``a-z`` and the apostrophe, with wordfreq's frequencies
  renormalised; each user draws one word (or, with ``multi_word``,
  ``1 + Poisson(words_per_user - 1)`` i.i.d. word occurrences).
* ``en-oov``: "out of vocabulary" words. The reference dictionary is the 100,000
  most frequent purely alphabetic (``[a-z]+``) words of the same list (a stand-in for
  the paper's "highly tuned dictionary of over 260k words", which is not available
  offline). OOV words are the words over the alphabet ``a-z 0-9 ' . _ -`` that are
  not in the dictionary: contractions and possessives ("it's", "don't"), numbers and
  ordinals ("1", "2nd"), abbreviations ("u.s", "e.g") and rare alphabetic words
  (names, misspellings, slang) ranked beyond the dictionary, renormalised. Entries
  containing the digit 0 are excluded from both English datasets: wordfreq stores
  multi-digit numbers as placeholders of zeros ("00", "0.0"), aggregates of many
  numbers rather than words.
* ``zipf``: a synthetic vocabulary of ``vocab_size`` distinct random words over
  ``a-z`` (lengths 1..8, generated from a fixed public seed), word of rank ``r``
  with probability proportional to ``r^-s``.
* ``zipf32`` (:func:`zipf32_population`, ``fedhh hh`` and ``eval compare``): Zipf(``s``)
  over ``support`` distinct random 32-bit items drawn from a fixed public seed; an
  item's word is its 8 hex digits.

Files: a text file with one user per line and words separated by whitespace
(blank lines are skipped), or a ``.csv`` file of ``user,item`` rows (an optional
header ``user,item``), UTF-8.
"""
from __future__ import annotations

import csv
import dataclasses
import functools
import io
import math
import pathlib
import re
import string
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

__all__ = [
    "DatasetError", "Population", "EN_ALPHABET", "OOV_ALPHABET", "FILE_ALPHABET",
    "ALPHABET_PRESETS", "resolve_alphabet",
    "english", "english_oov", "oov_vocabulary", "zipf", "zipf_vocabulary", "from_user_words", "load_file", "load_dataset",
    "sample_population", "DATASET_NAMES", "zipf32_population", "ZIPF32_SEED", "HEX",
]

EN_ALPHABET = string.ascii_lowercase + "'"
OOV_ALPHABET = string.ascii_lowercase + string.digits + "'._-"
FILE_ALPHABET = "".join(c for c in string.printable if not c.isspace() and c != "$")
#: named public alphabets, smallest first: ``--alphabet auto`` (the default for a word
#: file) takes the first that encodes every word of the file
ALPHABET_PRESETS = {"lower": EN_ALPHABET, "lower-digits": OOV_ALPHABET,
                    "printable": FILE_ALPHABET}
DICTIONARY_SIZE = 100_000
ZIPF_VOCAB_SEED = 20200826  # public: the synthetic vocabulary is the same for every run
DATASET_NAMES = ("en", "en-oov", "zipf")
ZIPF32_SEED = 0x32F1  # public: the 32-bit support is the same for every run
HEX = "0123456789abcdef"


class DatasetError(ValueError):
    """A missing, unreadable or malformed dataset, or impossible parameters."""


@dataclass(frozen=True)
class Population:
    """Users and their words (CSR), with the ground truth.

    Attributes:
        name: dataset name or path.
        vocabulary: distinct words (index = word id).
        offsets: ``(n + 1,)`` CSR row pointers.
        items: word ids of the user entries.
        counts: local occurrence counts of the entries (>= 1).
        alphabet: the public alphabet the words are written in.
        description: how the population was made.
        dropped: word occurrences dropped for characters outside the alphabet.
        notes: what loading changed or chose, for :func:`input_report`
            (``blank_lines`` skipped, ``byte_order_mark`` removed, ``alphabet_chosen``:
            how the alphabet was chosen, ``alphabet_from_data``).
    """

    name: str
    vocabulary: tuple[str, ...]
    offsets: np.ndarray
    items: np.ndarray
    counts: np.ndarray
    alphabet: str
    description: str = ""
    dropped: int = 0
    _cache: dict = field(default_factory=dict, repr=False, compare=False)
    notes: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        off = np.asarray(self.offsets, dtype=np.int64)
        it = np.asarray(self.items, dtype=np.int64)
        ct = np.asarray(self.counts, dtype=np.int64)
        if off.ndim != 1 or off.size < 1 or off[0] != 0 or np.any(np.diff(off) < 0) \
                or off[-1] != it.size or it.shape != ct.shape:
            raise DatasetError("inconsistent CSR arrays")
        if it.size and (it.min() < 0 or it.max() >= len(self.vocabulary)):
            raise DatasetError("word id outside the vocabulary")
        if ct.size and ct.min() < 1:
            raise DatasetError("local counts must be >= 1")
        if "$" in self.alphabet:
            raise DatasetError("the alphabet must not contain the EOS symbol '$'")
        object.__setattr__(self, "offsets", off)
        object.__setattr__(self, "items", it)
        object.__setattr__(self, "counts", ct)

    @property
    def n(self) -> int:
        """Number of users."""
        return int(self.offsets.size - 1)

    @property
    def words_per_user(self) -> np.ndarray:
        return np.diff(self.offsets)

    @property
    def single_word(self) -> bool:
        """True when every user holds exactly one word (Algorithm 1)."""
        return bool(np.all(self.words_per_user == 1))

    def occurrences_per_user(self) -> np.ndarray:
        """Total word occurrences held by each user."""
        c = np.concatenate([[0], np.cumsum(self.counts)])
        return c[self.offsets[1:]] - c[self.offsets[:-1]]

    def holders(self) -> np.ndarray:
        """Number of users holding each word (vocabulary order)."""
        return np.bincount(self.items, minlength=len(self.vocabulary))

    def occurrences(self) -> np.ndarray:
        """Total occurrences of each word."""
        return np.bincount(self.items, weights=self.counts,
                           minlength=len(self.vocabulary)).astype(np.int64)

    def frequency(self) -> np.ndarray:
        """Population frequency ``F(w) = (1/n) sum_i f_i(w)`` (Zhu et al., section 5)."""
        if "F" not in self._cache:
            totals = self.occurrences_per_user()
            totals = np.where(totals > 0, totals, 1)
            per_entry_user = np.repeat(np.arange(self.n), self.words_per_user)
            w = self.counts / totals[per_entry_user]
            self._cache["F"] = np.bincount(self.items, weights=w,
                                           minlength=len(self.vocabulary)) / max(self.n, 1)
        return self._cache["F"]

    def ranking(self) -> np.ndarray:
        """Word ids of the words present, most frequent first (ties by word)."""
        if "rank" not in self._cache:
            f = self.frequency()
            present = np.flatnonzero(f > 0)
            words = np.array(self.vocabulary, dtype=object)[present]
            order = np.lexsort((words.astype(str), -f[present]))
            self._cache["rank"] = present[order]
        return self._cache["rank"]

    def top(self, k: int) -> list[str]:
        """The ``k`` most frequent words."""
        return [self.vocabulary[i] for i in self.ranking()[:k]]

    def compact(self) -> "Population":
        """The same users with the vocabulary restricted to the words they hold
        (word ids renumbered in vocabulary order); cheaper to encode."""
        present = np.unique(self.items)
        if present.size == len(self.vocabulary):
            return self
        remap = np.full(len(self.vocabulary), -1, dtype=np.int64)
        remap[present] = np.arange(present.size)
        vocab = tuple(self.vocabulary[i] for i in present) or ("",)
        return Population(self.name, vocab, self.offsets, remap[self.items], self.counts,
                          self.alphabet, self.description, self.dropped, notes=self.notes)

    def subsample(self, n: int, rng: np.random.Generator) -> "Population":
        """``n`` users drawn without replacement (order kept).

        Raises:
            DatasetError: ``n`` larger than the population or < 1.
        """
        if not 1 <= n <= self.n:
            raise DatasetError(f"cannot take {n:,} users (--users) from {self.name}: it "
                               f"holds {self.n:,} user{'s' * (self.n != 1)}")
        if n == self.n:
            return self
        users = np.sort(rng.choice(self.n, n, replace=False))
        starts, ends = self.offsets[users], self.offsets[users + 1]
        lens = ends - starts
        idx = np.repeat(starts - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens) + \
            np.arange(lens.sum())
        return Population(self.name, self.vocabulary, np.concatenate([[0], np.cumsum(lens)]),
                          self.items[idx], self.counts[idx], self.alphabet,
                          self.description + f"; {n} users subsampled", self.dropped,
                          notes=self.notes)


# --- construction helpers -------------------------------------------------------
def _valid_words(words: Sequence[str], alphabet: str) -> np.ndarray:
    allowed = set(alphabet)
    return np.fromiter((bool(w) and set(w) <= allowed for w in words), dtype=bool,
                       count=len(words))


def sample_population(name: str, vocab: list[str], probs: np.ndarray, n: int,
                      rng: np.random.Generator, alphabet: str, description: str,
                      multi_word: bool, words_per_user: float) -> Population:
    """``n`` users drawing words from ``vocab`` with probabilities ``probs``.

    One word each, or (``multi_word``) ``1 + Poisson(words_per_user - 1)`` draws each,
    repeated draws counted. ``description`` is completed with how users were drawn.

    Raises:
        DatasetError: ``n < 1`` or ``words_per_user < 1``.
    """
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise DatasetError(f"the number of users must be >= 1, got {n!r}")
    p = np.asarray(probs, dtype=np.float64)
    p = p / p.sum()
    cdf = np.cumsum(p)
    cdf[-1] = 1.0
    if not multi_word:
        words = np.searchsorted(cdf, rng.random(n), side="right")
        words = np.minimum(words, len(vocab) - 1)
        return Population(name, tuple(vocab), np.arange(n + 1), words, np.ones(n, np.int64),
                          alphabet, description + f"; {n} users, one word each")
    if words_per_user < 1:
        raise DatasetError("words_per_user must be >= 1")
    per_user = 1 + rng.poisson(words_per_user - 1, n)
    total = int(per_user.sum())
    user_of = np.repeat(np.arange(n, dtype=np.int64), per_user)
    words = np.minimum(np.searchsorted(cdf, rng.random(total), side="right"), len(vocab) - 1)
    key = user_of * len(vocab) + words
    uniq, cnt = np.unique(key, return_counts=True)
    users, items = np.divmod(uniq, len(vocab))
    offsets = np.concatenate([[0], np.cumsum(np.bincount(users, minlength=n))])
    return Population(name, tuple(vocab), offsets, items, cnt.astype(np.int64), alphabet,
                      description + f"; {n} users, 1 + Poisson({words_per_user - 1:g}) "
                      "word occurrences each")


@functools.lru_cache(maxsize=1)
def _wordfreq_large() -> tuple[list[str], np.ndarray]:
    try:
        import wordfreq
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise DatasetError("the embedded datasets need the 'wordfreq' package") from exc
    freq = wordfreq.get_frequency_dict("en", wordlist="large")
    # wordfreq stores multi-digit numbers "smashed" to placeholders of zeros ("00",
    # "0.0", "0000"): aggregates of many numbers, not words. Drop every entry with a 0.
    words = sorted((w for w in freq if "0" not in w), key=lambda w: (-freq[w], w))
    return words, np.array([freq[w] for w in words], dtype=np.float64)


def english(n: int, rng: np.random.Generator, multi_word: bool = False,
            words_per_user: float = 5.0) -> Population:
    """The embedded default ``en``: English word frequencies from wordfreq.

    Raises:
        DatasetError: ``n < 1`` or wordfreq unavailable.
    """
    words, f = _wordfreq_large()
    ok = _valid_words(words, EN_ALPHABET)
    vocab = [w for w, k in zip(words, ok) if k]
    return sample_population("en", vocab, f[ok], n, rng, EN_ALPHABET,
                              f"wordfreq English 'large' list, {len(vocab)} words over a-z and '",
                              multi_word, words_per_user)


def oov_vocabulary() -> tuple[list[str], np.ndarray]:
    """The ``en-oov`` vocabulary and its (unnormalised) wordfreq frequencies."""
    words, f = _wordfreq_large()
    f = f.copy()
    alpha = re.compile(r"[a-z]+")
    dictionary: set[str] = set()
    for w in words:
        if alpha.fullmatch(w):
            dictionary.add(w)
            if len(dictionary) == DICTIONARY_SIZE:
                break
    ok = _valid_words(words, OOV_ALPHABET) & np.fromiter(
        (w not in dictionary for w in words), dtype=bool, count=len(words))
    return [w for w, k in zip(words, ok) if k], f[ok]


def english_oov(n: int, rng: np.random.Generator, multi_word: bool = False,
                words_per_user: float = 5.0) -> Population:
    """The embedded ``en-oov`` dataset (see the module docstring for the definition).

    Raises:
        DatasetError: ``n < 1``.
    """
    vocab, f = oov_vocabulary()
    return sample_population("en-oov", vocab, f, n, rng, OOV_ALPHABET,
                              f"wordfreq English words outside a {DICTIONARY_SIZE}-word "
                              f"alphabetic dictionary, {len(vocab)} words", multi_word,
                              words_per_user)


def zipf_vocabulary(vocab_size: int) -> list[str]:
    """``vocab_size`` distinct random words over a-z, lengths 1..8, fixed public seed."""
    if vocab_size < 1:
        raise DatasetError("vocab_size must be >= 1")
    g = np.random.default_rng(ZIPF_VOCAB_SEED)
    seen: dict[str, None] = {}
    letters = np.array(list(string.ascii_lowercase))
    while len(seen) < vocab_size:
        k = 2 * (vocab_size - len(seen)) + 16
        lens = g.integers(1, 9, k)
        chars = letters[g.integers(0, 26, (k, 8))]
        for row, ln in zip(chars, lens):
            seen.setdefault("".join(row[:ln]), None)
            if len(seen) == vocab_size:
                break
    return list(seen)


def zipf(n: int, rng: np.random.Generator, vocab_size: int = 10_000, exponent: float = 1.1,
         multi_word: bool = False, words_per_user: float = 5.0) -> Population:
    """A synthetic Zipf population.

    Raises:
        DatasetError: ``n < 1``, ``vocab_size < 1`` or ``exponent <= 0``.
    """
    if exponent <= 0:
        raise DatasetError("the Zipf exponent must be > 0")
    vocab = zipf_vocabulary(vocab_size)
    p = np.arange(1, vocab_size + 1, dtype=np.float64) ** -exponent
    return sample_population("zipf", vocab, p, n, rng, string.ascii_lowercase,
                              f"synthetic Zipf(s={exponent:g}) over {vocab_size} words",
                              multi_word, words_per_user)


def from_user_words(name: str, users: Sequence[Sequence[str]], alphabet: str,
                    description: str = "") -> Population:
    """Build a population from explicit word lists (one list per user; a word
    repeated in a list counts as several occurrences). Words with characters
    outside ``alphabet`` are dropped and counted.

    Raises:
        DatasetError: no users, or an invalid alphabet.
    """
    if not users:
        raise DatasetError("the population has no users")
    if not alphabet or "$" in alphabet or len(set(alphabet)) != len(alphabet):
        raise DatasetError("the alphabet must be non-empty distinct characters without '$'")
    allowed = set(alphabet)
    index: dict[str, int] = {}
    user_of: list[int] = []
    word_of: list[int] = []
    dropped = 0
    for u, ws in enumerate(users):
        for w in ws:
            if not w or not set(w) <= allowed:
                dropped += 1
                continue
            user_of.append(u)
            word_of.append(index.setdefault(w, len(index)))
    vocab = list(index)
    n = len(users)
    if not vocab:
        return Population(name, ("",), np.zeros(n + 1, np.int64), np.empty(0, np.int64),
                          np.empty(0, np.int64), alphabet, description, dropped)
    key = np.asarray(user_of, dtype=np.int64) * len(vocab) + np.asarray(word_of, dtype=np.int64)
    uniq, cnt = np.unique(key, return_counts=True)
    us, items = np.divmod(uniq, len(vocab))
    offsets = np.concatenate([[0], np.cumsum(np.bincount(us, minlength=n))])
    return Population(name, tuple(vocab), offsets, items, cnt.astype(np.int64), alphabet,
                      description, dropped)


def _bom_advice(where: str, line: int, word: str) -> str:
    """The refusal of a byte-order mark inside a file (one at the very start is removed
    and reported): it is an encoding signature, never a character to publish in the
    alphabet."""
    return (f"{where}:{line}: word {word!r} holds a UTF-8 byte-order mark (U+FEFF), an "
            "encoding signature left inside the file (files joined together?); remove it "
            "(e.g. re-save the file as UTF-8 without BOM) rather than adding it to the "
            "alphabet")


def resolve_alphabet(spec: str | None, words: Sequence[tuple[int, str]],
                     where: str = "the data", widest: bool = False) -> tuple[str, str]:
    """The public alphabet ``spec`` names, for the ``(line, word)`` pairs of a file.

    ``spec`` is ``None`` or ``"auto"`` (the smallest of :data:`ALPHABET_PRESETS` that
    encodes every word: ``lower`` = a-z and the apostrophe, ``lower-digits`` adds
    digits and ``. _ -``, ``printable`` = printable ASCII without whitespace and
    ``$``), a preset name, ``"data"`` (exactly the characters that occur, sorted), or
    the characters themselves. Returns ``(alphabet, how it was chosen)``.

    With ``widest`` (the caller drops unencodable words), ``auto`` falls back to the
    widest preset instead of raising.

    Choosing the alphabet from the data makes it depend on every user's words; in a
    deployment it is fixed and published before any data is collected (docs/triehh.md).

    Raises:
        DatasetError: ``auto`` and a word that no preset encodes (naming the place,
            line and word), or an alphabet that is empty, repeats a character or
            holds ``$``.
    """
    if spec in (None, "auto"):
        used = set().union(*(set(w) for _, w in words)) if words else set()
        for name, chars in ALPHABET_PRESETS.items():
            if used <= set(chars):
                return chars, f"auto: {name} ({len(chars)} characters), the smallest preset " \
                              "that encodes every word"
        if widest:
            return FILE_ALPHABET, f"auto: printable ({len(FILE_ALPHABET)} characters), the " \
                                  "widest preset"
        allowed = set(FILE_ALPHABET)
        line, word = next((ln, w) for ln, w in words if not set(w) <= allowed)
        bad = "".join(sorted(set(word) - allowed))
        if "\ufeff" in bad:
            raise DatasetError(_bom_advice(where, line, word))
        raise DatasetError(f"{where}:{line}: word {word!r} has characters {bad!r} that no "
                           f"preset alphabet ({', '.join(ALPHABET_PRESETS)}) holds; give "
                           "--alphabet data (the characters that occur) or the characters "
                           "with --alphabet CHARS, or --drop-unencodable to drop and count "
                           "such words")
    if spec == "data":
        chars = "".join(sorted(set().union(*(set(w) for _, w in words)))) if words else ""
        how = f"data: the {len(chars)} characters that occur"
    elif spec in ALPHABET_PRESETS:
        chars, how = ALPHABET_PRESETS[spec], f"{spec} ({len(ALPHABET_PRESETS[spec])} characters)"
    else:
        chars, how = spec, f"given ({len(spec)} characters)"
    if not chars or "$" in chars or len(set(chars)) != len(chars):
        raise DatasetError("the alphabet must be non-empty distinct characters without '$' "
                           f"(got {chars!r})")
    return chars, how


def load_file(path: str | pathlib.Path, alphabet: str | None = None,
              drop_unencodable: bool = False) -> Population:
    """Load a text file (one user per line, words separated by whitespace, blank
    lines skipped) or a ``.csv`` file of ``user,item`` rows (optional header).

    ``alphabet`` is resolved by :func:`resolve_alphabet` (default ``auto``: the
    smallest named preset that encodes every word; the choice is stated in the
    population's description). A word with a character outside the public alphabet
    is an error naming the file, line and word. With ``drop_unencodable`` such words
    are dropped and counted (``Population.dropped``), and users left without a word are
    removed (counted in the description), so that a user is never silently turned into
    one without words.

    Raises:
        DatasetError: the file is missing, unreadable, not UTF-8, empty, a CSV row
            does not have exactly two fields, or (without ``drop_unencodable``) a word
            has a character outside the alphabet.
    """
    p = pathlib.Path(path)
    if not p.exists():
        raise DatasetError(f"dataset file not found: {p}")
    if not p.is_file():
        raise DatasetError(f"dataset path is not a file: {p}")
    try:
        text = p.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{p} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise DatasetError(f"cannot read {p}: {exc.strerror}") from None
    # a byte-order mark is an encoding signature, not a character of the first word
    bom = text.startswith("\ufeff")
    text = text.removeprefix("\ufeff")
    blank = 0
    # users as lists of (line, word), in file order
    if p.suffix.lower() == ".csv":
        users: dict[str, list[tuple[int, str]]] = {}
        reader = csv.reader(io.StringIO(text, newline=""))
        try:
            for lineno, row in enumerate(reader, start=1):
                if not row or all(not c.strip() for c in row):
                    blank += 1
                    continue
                if len(row) != 2:
                    raise DatasetError(f"{p}:{lineno}: expected 2 fields (user,item), "
                                       f"got {len(row)}")
                u, item = row[0].strip(), row[1].strip()
                if lineno == 1 and (u.lower(), item.lower()) == ("user", "item"):
                    continue
                if not u or not item:
                    raise DatasetError(f"{p}:{lineno}: empty user or item field")
                users.setdefault(u, []).append((lineno, item))
        except csv.Error as exc:
            raise DatasetError(f"{p}: malformed CSV: {exc}") from None
        placed = list(users.values())
    else:
        lines = text.splitlines()
        placed = [[(lineno, w) for w in line.split()]
                  for lineno, line in enumerate(lines, start=1) if line.strip()]
        blank = len(lines) - len(placed)
    crlf = text.count("\r\n")
    if not placed:
        raise DatasetError(f"{p} holds no users")
    alpha, how = resolve_alphabet(alphabet, [lw for ws in placed for lw in ws], str(p),
                                  widest=drop_unencodable)
    allowed = set(alpha)
    dropped = 0
    lists: list[list[str]] = []
    for ws in placed:
        kept = []
        for lineno, word in ws:
            if set(word) <= allowed:
                kept.append(word)
            elif not drop_unencodable:
                bad = "".join(sorted(set(word) - allowed))
                if "\ufeff" in bad:
                    raise DatasetError(_bom_advice(str(p), lineno, word))
                raise DatasetError(f"{p}:{lineno}: word {word!r} has characters {bad!r} "
                                   f"outside the public alphabet ({how}); give --alphabet "
                                   "with them, or --drop-unencodable to drop and count such "
                                   "words")
            else:
                dropped += 1
        lists.append(kept)
    description = f"file {p}, {len(lists)} users, alphabet {how}"
    if dropped:
        empty = sum(not ws for ws in lists)
        lists = [ws for ws in lists if ws]
        if not lists:
            raise DatasetError(f"{p}: every word has characters outside the public alphabet")
        description += (f"; {dropped} words with characters outside the alphabet dropped, "
                        f"{empty} users left without a word removed")
    if blank:
        description += f"; {blank} blank lines skipped"
    if bom:
        description += "; a UTF-8 byte-order mark at the start removed"
    pop = from_user_words(str(p), lists, alpha, description)
    notes = {"blank_lines": blank, "byte_order_mark": bom, "alphabet_chosen": how,
             "crlf_lines": crlf,
             "alphabet_from_data": how.startswith("data"),
             "users_removed": empty if dropped else 0}
    return dataclasses.replace(pop, dropped=dropped, notes=notes)


def input_report(pop: Population, max_chars: int | None = None) -> dict:
    """What loading ``pop`` chose and changed, as JSON types: the public alphabet and
    how it was chosen (``alphabet_from_data`` when it was read off the users' words),
    blank lines skipped, a byte-order mark removed, words dropped for characters
    outside the alphabet, and (with ``max_chars``, the longest word the mechanism can
    release) the words longer than that and how many users hold one.
    """
    notes = dict(pop.notes)
    out: dict = {
        "alphabet": pop.alphabet,
        "alphabet_chosen": notes.get("alphabet_chosen") or "the dataset's public alphabet",
        "alphabet_from_data": bool(notes.get("alphabet_from_data", False)),
        "blank_lines": int(notes.get("blank_lines", 0)),
        "byte_order_mark_removed": bool(notes.get("byte_order_mark", False)),
        "crlf_lines": int(notes.get("crlf_lines", 0)),
        "dropped_words": int(pop.dropped),
        "users_removed": int(notes.get("users_removed", 0)),
    }
    if max_chars is not None:
        lengths = np.fromiter((len(w) for w in pop.vocabulary), dtype=np.int64,
                              count=len(pop.vocabulary))
        long = lengths > max_chars
        entry_long = long[pop.items] if pop.items.size else np.zeros(0, bool)
        users = np.repeat(np.arange(pop.n), np.diff(pop.offsets))[entry_long]
        held = np.unique(pop.items[entry_long]) if entry_long.any() else np.zeros(0, np.int64)
        out["too_long"] = {"max_characters": int(max_chars), "words": int(held.size),
                           "users": int(np.unique(users).size)}
    return out


def users_left(pop: Population) -> str:
    """How many users a run has and what loading dropped to get there, for the "too few
    users" messages (:func:`protocol.studies.errors.too_few_users`): ``"2 users are
    left after dropping 998 words with characters outside the alphabet (998 users left
    without a word), skipping 3 blank lines and a byte-order mark"``, or ``"the
    population has 10 users"`` when nothing was dropped."""
    notes = dict(pop.notes)
    n = pop.n
    dropped = []
    if pop.dropped:
        removed = int(notes.get("users_removed", 0))
        dropped.append(f"{pop.dropped:,} word{'s' * (pop.dropped != 1)} with characters "
                       "outside the alphabet"
                       + (f" ({removed:,} users left without a word)" if removed else ""))
    skipped = []
    if notes.get("blank_lines"):
        b = int(notes["blank_lines"])
        skipped.append(f"{b:,} blank line{'s' * (b != 1)}")
    if notes.get("byte_order_mark"):
        skipped.append("a byte-order mark")
    if notes.get("crlf_lines"):
        c = int(notes["crlf_lines"])
        skipped.append(f"the carriage returns of {c:,} CRLF line end{'s' * (c != 1)}")
    sub = "users subsampled" in (pop.description or "")
    users = f"{n:,} user{'s' * (n != 1)}"
    if not dropped and not skipped:
        return f"the population has {users}" + (" (subsampled)" if sub else "")
    if not dropped:
        return (f"the population has {users} (after skipping " + " and ".join(skipped)
                + (", then subsampled)" if sub else ")"))
    verb = "is" if n == 1 else "are"
    what = []
    if dropped:
        what.append("dropping " + ", ".join(dropped))
    if skipped:
        what.append("skipping " + " and ".join(skipped))
    return f"{users} {verb} left after " + ", ".join(what) + (" (then subsampled)" if sub
                                                               else "")


def input_warnings(report: dict) -> list[str]:
    """The sentences a person should read about ``report`` (:func:`input_report`):
    nothing is dropped, truncated or chosen for them without a line saying so."""
    out = []
    if report.get("alphabet_from_data"):
        out.append("the public alphabet was read off the users' words (--alphabet data): it "
                   "depends on every user's data, which a deployment must not do; fix it "
                   "and publish it before collecting (docs/triehh.md)")
    if report.get("domain_from_data"):
        out.append("the domain's items were read off the users' items: it depends on "
                   "every user's data, which a deployment must not do; fix the public "
                   "domain and publish it before collecting (docs/ldp.md)")
    if report.get("blank_lines"):
        out.append(f"{report['blank_lines']} blank lines skipped (they hold no user)")
    if report.get("byte_order_mark_removed"):
        out.append("a UTF-8 byte-order mark (U+FEFF) at the start of the file was removed")
    if report.get("crlf_lines"):
        out.append(f"{report['crlf_lines']:,} lines end in CRLF (Windows line ends): read "
                   "as line ends, the carriage returns dropped")
    if report.get("dropped_words"):
        out.append(f"{report['dropped_words']} words with characters outside the alphabet "
                   f"dropped, {report.get('users_removed', 0)} users left without a word "
                   "removed (--drop-unencodable)")
    long = report.get("too_long") or {}
    if long.get("words"):
        out.append(f"{long['words']} distinct words longer than {long['max_characters']} "
                   f"characters, held by {long['users']} users, can never be released "
                   "whole (raise --max-length)")
    if report.get("clipped"):
        c = report["clipped"]
        out.append(f"{c['below'] + c['above']:,} values outside the public range "
                   f"[{c['lo']:g}, {c['hi']:g}] clipped to it ({c['below']:,} below, "
                   f"{c['above']:,} above)")
    if report.get("truncated"):
        t = report["truncated"]
        out.append(f"{t['users']} users' words are longer than {t['max_characters']} "
                   f"characters; {t['what']}")
    return out


def load_dataset(name: str, n: int | None, rng: np.random.Generator, multi_word: bool = False,
                 alphabet: str | None = None, drop_unencodable: bool = False) -> Population:
    """Dispatch ``en``, ``en-oov``, ``zipf`` or a file path.

    For a file, ``n`` (when given) subsamples that many users; without
    ``multi_word`` every user of a file must hold exactly one word occurrence.

    Raises:
        DatasetError: unknown name that is not an existing file, bad ``n``, or a
            file user with several words in single-word mode.
    """
    default_n = 100_000
    if name in ("en", "en-oov", "zipf") and alphabet is not None:
        raise DatasetError(f"--alphabet applies to a word file (--dataset PATH); the "
                           f"embedded dataset {name!r} has its own public alphabet")
    if name in ("en", "en-oov", "zipf") and drop_unencodable:
        raise DatasetError(f"--drop-unencodable applies to a word file (--dataset PATH); "
                           f"the embedded dataset {name!r} holds only characters of its "
                           "own alphabet")
    if name == "en":
        return english(default_n if n is None else n, rng, multi_word)
    if name == "en-oov":
        return english_oov(default_n if n is None else n, rng, multi_word)
    if name == "zipf":
        return zipf(default_n if n is None else n, rng, multi_word=multi_word)
    p = pathlib.Path(name)
    if not p.exists():
        raise DatasetError(f"unknown dataset {name!r}: not one of {', '.join(DATASET_NAMES)} "
                           "and no such file")
    pop = load_file(p, alphabet, drop_unencodable)
    if n is not None:
        pop = pop.subsample(n, rng)
    if not multi_word:
        several = np.flatnonzero(pop.occurrences_per_user() > 1)
        if several.size:
            raise DatasetError(f"{p}: {several.size} users hold more than one word; "
                               "use --multi-word (Algorithm 3)")
    return pop


def zipf32_population(n: int, rng: np.random.Generator, support: int = 10_000,
                      s: float = 1.1) -> Population:
    """``n`` users, one 32-bit item each, rank ``r`` with probability proportional to
    ``r^-s`` over ``support`` distinct items (fixed public seed); words are 8 hex digits.

    Raises:
        DatasetError: bad sizes or exponent.
    """
    if not 1 <= support <= 1 << 24:
        raise DatasetError("support must be in [1, 2^24]")
    if not (math.isfinite(s) and s > 0):
        raise DatasetError("the Zipf exponent must be > 0")
    g = np.random.default_rng(ZIPF32_SEED)
    items = np.unique(g.integers(0, 1 << 32, 2 * support + 64, dtype=np.uint64))
    items = g.permutation(items)[:support]
    vocab = [f"{int(x):08x}" for x in items]
    probs = np.arange(1, support + 1, dtype=float) ** -s
    return sample_population("zipf32", vocab, probs, n, rng, HEX,
                             f"Zipf(s={s:g}) over {support} random 32-bit items", False, 1.0)
