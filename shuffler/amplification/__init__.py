"""Privacy amplification by shuffling: central (epsilon, delta) of n shuffled LDP reports.

Setting. Each of ``n`` users applies an ``epsilon0``-LDP local randomiser to its own input
and the shuffler forwards the ``n`` reports in a uniformly random order (only the
multiset reaches the analyst). The bounds below say for which ``(epsilon, delta)`` the
shuffled output is central ``(epsilon, delta)``-DP with respect to one user's input
(replacement adjacency). All of them are *upper* bounds: the true privacy loss is at most
what they report. Where a bound returns a value it is a certificate; where its theorem
does not cover the parameters it raises :class:`AmplificationDomainError`.

Trivial bound. The shuffled output is a post-processing of the ``n`` reports and one
user's input changes one report, so it is always ``(epsilon0, 0)``-DP. Every forward
function therefore returns ``min(bound, epsilon0)``, and every inverse accepts any
``epsilon0 <= epsilon``.

Bounds (names as used by :func:`central_epsilon` and :func:`local_epsilon`):

``efmrtt19`` (:mod:`.efmrtt19`)
    Erlingsson et al., SODA 2019.
``bbgn19_hoeffding`` and ``bbgn19_triehh`` (:mod:`.blanket`)
    Balle, Bell, Gascon, Nissim, CRYPTO 2019, and the TrieHH authors' closed form.
``fmt21_closed_form`` (:mod:`.fmt21_closed_form`)
    Feldman, McMillan, Talwar, FOCS 2021, Theorem 3.1.
``fmt21_numerical`` and ``fmt23_numerical`` (:mod:`.clones`)
    The clone reduction of Feldman, McMillan, Talwar (FOCS 2021, SODA 2023), evaluated
    exactly with Loader's binomial pmf (:mod:`.binomial`).

Argument checks live in :mod:`.checks`, the inverse solvers' searches in :mod:`.search`,
and the name -> bound table with :func:`central_epsilon` and :func:`local_epsilon` in
:mod:`.registry`.

Assumptions. Reports are pure ``epsilon0``-LDP (``delta0 = 0``), every user uses an
``epsilon0``-LDP randomiser, the shuffle is uniform and secret, and each user sends one
report. Nothing here accounts for composition over several rounds or reports per user.
"""
from .blanket import (
    blanket_hoeffding_delta, blanket_hoeffding_epsilon, blanket_hoeffding_epsilon0,
    triehh_blanket_delta, triehh_blanket_epsilon, triehh_blanket_epsilon0,
)
from .checks import MAX_EPSILON0, AmplificationDomainError
from .clones import clone_delta, clone_epsilon, clone_epsilon0, clone_log_delta, clone_probability
from .efmrtt19 import efmrtt19_epsilon, efmrtt19_epsilon0
from .fmt21_closed_form import fmt21_closed_form_epsilon, fmt21_closed_form_epsilon0
from .registry import BOUNDS, BoundInfo, central_epsilon, local_epsilon

__all__ = [
    "AmplificationDomainError",
    "BoundInfo",
    "BOUNDS",
    "MAX_EPSILON0",
    "central_epsilon",
    "local_epsilon",
    "efmrtt19_epsilon",
    "efmrtt19_epsilon0",
    "fmt21_closed_form_epsilon",
    "fmt21_closed_form_epsilon0",
    "blanket_hoeffding_delta",
    "blanket_hoeffding_epsilon",
    "blanket_hoeffding_epsilon0",
    "triehh_blanket_delta",
    "triehh_blanket_epsilon",
    "triehh_blanket_epsilon0",
    "clone_probability",
    "clone_log_delta",
    "clone_delta",
    "clone_epsilon",
    "clone_epsilon0",
]
