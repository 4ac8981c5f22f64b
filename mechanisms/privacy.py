"""One privacy-guarantee type for every mechanism, calculator and command.

A mechanism states its guarantee as a frozen :class:`PrivacyGuarantee`, in the spirit of
Google's dp_accounting (a mechanism is described by an immutable privacy *event*) and
OpenDP (every mechanism carries its privacy *map*): the value says

* which result it comes from: ``theorem``, the short label the commands print (e.g.
  ``"Zhu et al. 2020, Theorem 1"``), and ``citation``, the paper (authors, title, year);
* the parameters it was evaluated at, as data (``parameters``);
* whom it protects against (``protects_against``) and in which model (``model``):
  ``"local"`` means every report is randomised on the user's device, so the guarantee
  holds against *any party* that sees reports; ``"central"`` means the theorem covers
  the released output, so it protects against the *analyst* who receives the release
  (parties that see more, e.g. a plaintext aggregator that sees every vote, are not
  covered);
* an ``(epsilon, delta)`` view (:meth:`PrivacyGuarantee.epsilon_delta`) for the
  neighbouring relation the result is stated for (``unit``: add/remove one user for
  TrieHH and TrieHH++, replace one user's input for amplification by shuffling, any two
  inputs of one user for local DP).

:meth:`PrivacyGuarantee.to_json` renders it as the JSON object the commands print.
Amplification by shuffling (``shuffler/amplification.py``) returns plain numbers because
``shuffler/`` may not import ``mechanisms/``; :func:`shuffled` wraps such a number.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

__all__ = [
    "Citation", "PrivacyGuarantee", "PrivacyGuaranteeError", "LOCAL", "CENTRAL", "MODELS",
    "ANY_PARTY", "ANALYST", "ANALYST_SHUFFLER_HONEST", "PARTIES", "ADD_REMOVE", "REPLACE",
    "ANY_TWO_INPUTS", "CITATIONS", "AMPLIFICATION_CITATIONS",
    "citation_for",
    "local_guarantee", "shuffled",
]

LOCAL = "local"
CENTRAL = "central"
MODELS = (LOCAL, CENTRAL)

#: local DP: every report is randomised before it leaves the user
ANY_PARTY = "any party"
#: central DP of the release: the analyst who receives it
ANALYST = "analyst"
#: amplification by shuffling: the analyst, if the shuffler hides who sent which report
ANALYST_SHUFFLER_HONEST = "analyst (shuffler honest)"
PARTIES = (ANY_PARTY, ANALYST, ANALYST_SHUFFLER_HONEST)

#: neighbouring relations (``PrivacyGuarantee.unit``)
ADD_REMOVE = "add or remove one user"
REPLACE = "replace one user's input"
ANY_TWO_INPUTS = "any two inputs of one user"


class PrivacyGuaranteeError(ValueError):
    """A guarantee constructed with values outside their range."""


@dataclass(frozen=True, slots=True)
class Citation:
    """The paper a guarantee is proved in.

    Attributes:
        authors: the authors, comma separated, as on the paper.
        title: the paper's title.
        year: publication year (``None`` when the repository does not record it).
        venue: where it appeared (may be empty).
    """

    authors: str
    title: str
    year: int | None
    venue: str = ""

    def to_json(self) -> dict[str, Any]:
        """``{"authors", "title", "year", "venue"}``."""
        return {"authors": self.authors, "title": self.title, "year": self.year,
                "venue": self.venue}


#: The papers the mechanisms' guarantees come from, keyed by mechanism name.
ZHU_2020 = Citation("Wennan Zhu, Peter Kairouz, Brendan McMahan, Haicheng Sun, Wei Li",
                    "Federated Heavy Hitters Discovery with Differential Privacy", 2020,
                    "AISTATS")
CORMODE_2021 = Citation("Graham Cormode", "Federated heavy hitters revisited", 2021)
WANG_2017 = Citation("Tianhao Wang, Jeremiah Blocki, Ninghui Li, Somesh Jha",
                     "Locally Differentially Private Protocols for Frequency Estimation", 2017,
                     "USENIX Security")
WANG_2019 = Citation("Tianhao Wang, Ninghui Li, Somesh Jha",
                     "Locally Differentially Private Heavy Hitter Identification", 2019,
                     "IEEE TDSC")
APPLE_2017 = Citation("Apple Differential Privacy Team", "Learning with Privacy at Scale",
                      2017, "Apple Machine Learning Journal")
ZHANG_2024 = Citation("Zhang, Ye, Hu",
                      "Federated Heavy Hitter Analytics with Local Differential Privacy", 2024,
                      "arXiv 2412.14832")
#: the repository records only the title of the All-or-Nothing paper
AON_PAPER = Citation("", "A distributed algorithm for differentially private heavy hitters",
                     None)
CITATIONS: Mapping[str, Citation] = MappingProxyType({
    "triehh": ZHU_2020, "triehhpp": CORMODE_2021, "quantiles": CORMODE_2021,
    "grr": WANG_2017, "oue": WANG_2017, "olh": WANG_2017, "aon": AON_PAPER,
    "pem": WANG_2019, "cms": APPLE_2017, "hcms": APPLE_2017, "sfp": APPLE_2017,
    "tap": ZHANG_2024, "taps": ZHANG_2024, "fedpem": ZHANG_2024, "gtf": ZHANG_2024,
})

EFMRTT_2019 = Citation("Ulfar Erlingsson, Vitaly Feldman, Ilya Mironov, Ananth Raghunathan, "
                       "Kunal Talwar, Abhradeep Thakurta",
                       "Amplification by Shuffling: From Local to Central Differential Privacy "
                       "via Anonymity", 2019, "SODA")
BBGN_2019 = Citation("Borja Balle, James Bell, Adria Gascon, Kobbi Nissim",
                     "The Privacy Blanket of the Shuffle Model", 2019, "CRYPTO")
FMT_2021 = Citation("Vitaly Feldman, Audra McMillan, Kunal Talwar",
                    "Hiding Among the Clones: A Simple and Nearly Optimal Analysis of Privacy "
                    "Amplification by Shuffling", 2021, "FOCS")
FMT_2023 = Citation("Vitaly Feldman, Audra McMillan, Kunal Talwar",
                    "Stronger Privacy Amplification by Shuffling for Renyi and Approximate "
                    "Differential Privacy", 2023, "SODA")
#: The papers of the amplification bounds, keyed by ``shuffler.amplification.BOUNDS`` names
#: (``bbgn19_triehh`` is a closed form that cites Balle et al.'s Theorem 5.3).
AMPLIFICATION_CITATIONS: Mapping[str, Citation] = MappingProxyType({
    "efmrtt19": EFMRTT_2019, "bbgn19_hoeffding": BBGN_2019, "bbgn19_triehh": BBGN_2019,
    "fmt21_closed_form": FMT_2021, "fmt21_numerical": FMT_2021, "fmt23_numerical": FMT_2023,
})


def citation_for(mechanism: str) -> Citation | None:
    """The paper of ``mechanism``'s guarantee, or ``None`` when none is recorded."""
    return CITATIONS.get(mechanism)


@dataclass(frozen=True, slots=True)
class PrivacyGuarantee:
    """A mechanism's privacy guarantee as an immutable value.

    Attributes:
        mechanism: short name of the mechanism ("triehh", "olh", "sfp", ...).
        epsilon: the epsilon of (epsilon, delta)-DP.
        delta: the delta.
        theorem: the result it comes from, as the commands print it (authors, year and
            theorem, lemma or section, e.g. "Zhu et al. 2020, Theorem 1").
        model: ``"local"`` (each report) or ``"central"`` (the release).
        protects_against: the party whose view the guarantee covers (:data:`PARTIES`).
        parameters: the mechanism parameters the guarantee was evaluated at.
        citation: the paper, when recorded.
        unit: the neighbouring relation the cited result is stated for
            (:data:`ADD_REMOVE`, :data:`REPLACE` or, for local DP, :data:`ANY_TWO_INPUTS`).

    Raises:
        PrivacyGuaranteeError: on construction with a negative or NaN epsilon, a delta
            outside ``[0, 1]``, or an unknown model or party.
    """

    mechanism: str
    epsilon: float
    delta: float
    theorem: str
    model: str
    protects_against: str
    parameters: Mapping[str, Any] = field(default_factory=dict)
    citation: Citation | None = None
    unit: str = ADD_REMOVE

    def __post_init__(self) -> None:
        if isinstance(self.epsilon, bool) or not isinstance(self.epsilon, (int, float)) \
                or math.isnan(self.epsilon) or self.epsilon < 0:
            raise PrivacyGuaranteeError(f"epsilon must be a number >= 0, got {self.epsilon!r}")
        if isinstance(self.delta, bool) or not isinstance(self.delta, (int, float)) \
                or not 0.0 <= self.delta <= 1.0:
            raise PrivacyGuaranteeError(f"delta must be in [0, 1], got {self.delta!r}")
        if self.model not in MODELS:
            raise PrivacyGuaranteeError(f"model must be one of {MODELS}, got {self.model!r}")
        if self.protects_against not in PARTIES:
            raise PrivacyGuaranteeError(
                f"protects_against must be one of {PARTIES}, got {self.protects_against!r}")
        object.__setattr__(self, "parameters", MappingProxyType(dict(self.parameters)))

    def epsilon_delta(self) -> tuple[float, float]:
        """The ``(epsilon, delta)`` view."""
        return float(self.epsilon), float(self.delta)

    @property
    def effective_epsilon(self) -> float:
        """The exact epsilon of the implementation when it is tighter than ``epsilon``
        (``parameters["effective_epsilon"]``, e.g. an oracle's 32-bit coins), else
        ``epsilon``."""
        return float(self.parameters.get("effective_epsilon", self.epsilon))

    def to_json(self, legacy: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The JSON object commands print.

        Args:
            legacy: keys a command printed before this type existed (e.g. ``"source"``,
                ``"kind"``); they come first and keep their values, and the fields below
                that they do not already name follow.

        Returns:
            ``epsilon``, ``delta``, ``theorem``, ``parameters``, ``mechanism``, ``model``,
            ``protects_against``, ``unit`` and ``citation`` (``null`` when none is
            recorded), after ``legacy``.
        """
        out: dict[str, Any] = dict(legacy or {})
        fields = {"epsilon": self.epsilon, "delta": self.delta, "theorem": self.theorem,
                  "parameters": dict(self.parameters), "mechanism": self.mechanism,
                  "model": self.model, "protects_against": self.protects_against,
                  "unit": self.unit,
                  "citation": None if self.citation is None else self.citation.to_json()}
        for key, value in fields.items():
            out.setdefault(key, value)
        return out

    def as_dict(self) -> dict[str, Any]:
        """Same as :meth:`to_json` without legacy keys."""
        return self.to_json()


def local_guarantee(mechanism: str, epsilon: float, theorem: str,
                    parameters: Mapping[str, Any] | None = None,
                    citation: Citation | None = None) -> PrivacyGuarantee:
    """A pure ``epsilon``-LDP guarantee (``delta = 0``) against any party.

    Raises:
        PrivacyGuaranteeError: ``epsilon`` negative or NaN.
    """
    return PrivacyGuarantee(mechanism, float(epsilon), 0.0, theorem, LOCAL, ANY_PARTY,
                            parameters or {}, citation or citation_for(mechanism),
                            ANY_TWO_INPUTS)


def shuffled(local: PrivacyGuarantee, n: int, epsilon: float, delta: float, bound: str,
             source: str, note: str | None = None) -> PrivacyGuarantee:
    """The central guarantee of ``n`` shuffled reports, each under ``local``.

    ``epsilon`` is what an amplification bound of ``shuffler.amplification`` returned
    for ``(n, local.epsilon, delta)``.

    Args:
        local: the local guarantee of one report (``model == "local"``).
        n: number of shuffled reports.
        epsilon: the central epsilon the bound certifies.
        delta: the central delta.
        bound: the bound's name (a key of ``shuffler.amplification.BOUNDS``).
        source: the bound's source, as ``BOUNDS[bound].source`` spells it.
        note: why the bound fell back to the trivial ``epsilon0``, if it did.

    Raises:
        PrivacyGuaranteeError: ``local`` is not a local guarantee, or a value is out of
            range.
    """
    if local.model != LOCAL:
        raise PrivacyGuaranteeError("amplification by shuffling needs a local guarantee")
    params: dict[str, Any] = {"n": int(n), "local_epsilon": float(local.epsilon),
                              "bound": bound}
    if note is not None:
        params["note"] = note
    return PrivacyGuarantee(local.mechanism, float(epsilon), float(delta), source, CENTRAL,
                            ANALYST_SHUFFLER_HONEST, params, AMPLIFICATION_CITATIONS.get(bound),
                            REPLACE)
