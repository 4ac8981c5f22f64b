"""The runnable Flower project ``fedhh flower new DIR`` writes (no Flower import here).

Two apps:

* ``fedavg``: a numpy logistic-regression FedAvg app whose fit rounds go through our
  secure aggregation (``fedhh_secagg_mod`` / ``FedhhSecAggWorkflow``): the two lines a
  user changes in an existing SecAgg+ app are marked ``# fedhh``.
* ``triehh``: TrieHH's ServerApp and ClientApp (:mod:`protocol.flower.triehh_app`) on
  the embedded word population.
* ``triehhpp``: TrieHH++'s (:mod:`protocol.flower.triehhpp_app`) on the embedded Zipf
  population; the nodes decide who takes part from the shared ``pki/participation.key``.

Both come with ``pyproject.toml`` (the ``[tool.flwr.app]`` components and a local
simulation federation, for ``flwr run .``), ``run.py`` (Flower's simulation engine from
Python, or ``--local`` for the in-process grid), the malicious variant's PKI in ``pki/``
for the simulated nodes, and a README.
"""
from __future__ import annotations

import pathlib
import re

__all__ = ["APPS", "write_project"]

APPS = ("fedavg", "triehh", "triehhpp")

_PYPROJECT = '''[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "{name}"
version = "0.1.0"
description = "A Flower app with fedhh secure aggregation ({app})"
requires-python = ">=3.10"
dependencies = ["fedhh[flower]", "flwr[simulation]==1.42.0"]

# `flwr run` installs an app's dependencies with uv (`uv sync`) into a fresh environment
# laid over the one Flower runs in, which already holds fedhh and Flower: uv leaves these
# two (and what they bring) out, so a run never looks for them on a package index.
[tool.uv]
exclude-dependencies = ["fedhh", "flwr"]

[tool.hatch.build.targets.wheel]
packages = ["{module}"]

[tool.flwr.app]
publisher = "fedhh"
# the nodes' secret keys stay out of the app bundle Flower ships to every node
fab-exclude = ["pki/**"]

[tool.flwr.app.components]
serverapp = "{module}.server_app:app"
clientapp = "{module}.client_app:app"

[tool.flwr.app.config]
{config}
'''

_COMMON = '''"""Where this project's PKI is: ``pki/`` beside this package or, when Flower runs
the app from its installed bundle (which leaves the keys out), the directory
``fedhh flower new`` wrote. A deployment gives each node only its own ``node-<i>.key``
(node config ``fedhh-pki``) and everyone the public ``roster.json``."""
import pathlib

_BESIDE = pathlib.Path(__file__).resolve().parent.parent / "pki"
PKI = str(_BESIDE if (_BESIDE / "roster.json").exists() else pathlib.Path({pki!r}))
THREAT = "{threat}"
#: identities in the PKI: the most nodes a run can have
NODES = {nodes}
'''

_FEDAVG_CLIENT = '''"""ClientApp: logistic regression on this node's synthetic data; the update leaves the
node only through fedhh's secure aggregation."""
import numpy as np
from flwr.client import ClientApp, NumPyClient
from protocol.flower.secagg_mod import make_secagg_mod  # fedhh

from .common import PKI, THREAT

DIM = {dim}


def node_data(pid):
    rng = np.random.default_rng([0, pid])
    w_true = np.random.default_rng([0, 1 << 30]).normal(size=DIM)
    x = rng.normal(size=(20, DIM))
    y = (x @ w_true + 0.3 * rng.normal(size=20) > 0).astype(np.float64)
    return x, y


class LogReg(NumPyClient):
    def __init__(self, pid):
        self.x, self.y = node_data(pid)

    def fit(self, parameters, config):
        w, b = parameters
        p = 1.0 / (1.0 + np.exp(-(self.x @ w + b[0])))
        g = p - self.y
        w = w - 0.5 * (self.x.T @ g) / len(self.y)
        b = b - 0.5 * np.array([g.mean()])
        return [w, b], len(self.y), {{}}


def client_fn(context):
    return LogReg(int(context.node_config["partition-id"])).to_client()


# fedhh: was mods=[secaggplus_mod]
app = ClientApp(client_fn=client_fn, mods=[make_secagg_mod(threat=THREAT, pki=PKI)])
'''

_FEDAVG_SERVER = '''"""ServerApp: FedAvg whose fit rounds are summed by fedhh's secure aggregation, over
every node of the federation. Flower's local simulation has 2 nodes unless told
otherwise (`flwr run .`), fewer than secure aggregation needs: each node then hosts
several of its devices (the sum is the same). With so few nodes the sum hides little:
the server and one node learn the other node's update; for privacy run
`flwr run . --federation-config "num-supernodes=10"`."""
import json
import time
from logging import INFO, WARNING

import numpy as np
from flwr.common import ndarrays_to_parameters
from flwr.common.logger import log
from flwr.server import LegacyContext, ServerApp, ServerConfig
from flwr.server.strategy import FedAvg
from flwr.server.workflow import DefaultWorkflow
from protocol.flower.session import FlowerSecAggError, Policy, devices_for
from protocol.flower.workflow import FedhhSecAggWorkflow  # fedhh

from .client_app import DIM
from .common import NODES, PKI, THREAT

app = ServerApp()
#: the fewest nodes for which we recommend the run (below, the sum hides little)
PRIVATE_NODES = 10


def federation_nodes(grid, wait=30.0):
    """The federation's nodes, once at least two have registered (or ``wait`` passed);
    refused in one line when secure aggregation cannot run among them."""
    deadline = time.monotonic() + wait
    nodes = list(grid.get_node_ids())
    while len(nodes) < 2 and time.monotonic() < deadline:
        time.sleep(0.5)
        nodes = list(grid.get_node_ids())
    n = len(nodes)
    how = f'flwr run . --federation-config "num-supernodes={max(NODES, PRIVATE_NODES)}"'
    try:
        devices = devices_for(Policy(threat=THREAT), n)
    except FlowerSecAggError as exc:
        raise RuntimeError(f"fedhh secure aggregation ({THREAT} server): {exc}: {how}") from None
    if THREAT == "malicious" and devices > NODES:
        raise RuntimeError(f"the federation has {n} nodes ({devices} devices of secure "
                           f"aggregation) and pki/ holds keys for {NODES}: fedhh flower "
                           f"keys pki --nodes {devices} --force, or {how}")
    if devices > n:
        log(INFO, "fedhh: %s nodes host the %s devices secure aggregation (%s server) "
            "needs: device j on node j mod %s", n, devices, THREAT, n)
    if n < PRIVATE_NODES:
        log(WARNING, "fedhh: only %s nodes: the server and %s of them learn the last "
            "one's update from the sum (a node hosting k devices counts as k corrupt "
            "devices); for privacy: %s", n, n - 1, how)
    return nodes


@app.main()
def main(grid, context):
    rounds = int(context.run_config.get("num-server-rounds", 3))
    nodes = len(federation_nodes(grid))
    strategy = FedAvg(fraction_fit=1.0, fraction_evaluate=0.0, min_fit_clients=nodes,
                      min_available_clients=nodes,
                      initial_parameters=ndarrays_to_parameters([np.zeros(DIM), np.zeros(1)]))
    ctx = LegacyContext(context=context, config=ServerConfig(num_rounds=rounds),
                        strategy=strategy)
    # fedhh: was fit_workflow=SecAggPlusWorkflow(num_shares=..., reconstruction_threshold=...)
    DefaultWorkflow(fit_workflow=FedhhSecAggWorkflow(threat=THREAT, pki=PKI))(grid, ctx)
    w, b = ctx.state.array_records["parameters"].to_numpy_ndarrays()
    log(INFO, "fedhh result: %s", json.dumps({"nodes": nodes, "rounds": rounds,
                                              "w": w.tolist(), "b": b.tolist()}))
'''

_TRIEHH_CLIENT = '''"""ClientApp: this node holds one user's word and votes in TrieHH's rounds."""
from protocol.flower.triehh_app import make_client_app

from .common import PKI, THREAT
from .options import OPTIONS

app = make_client_app(OPTIONS, threat=THREAT, pki=PKI)
'''

_TRIEHH_SERVER = '''"""ServerApp: TrieHH over fedhh's secure aggregation among the nodes."""
from protocol.flower.triehh_app import make_server_app

from .common import PKI, THREAT
from .options import OPTIONS

app = make_server_app(OPTIONS, threat=THREAT, pki=PKI)
'''

_TRIEHH_OPTIONS = '''"""TrieHH's options: those of ``fedhh triehh`` (the nodes are the users)."""
from protocol.studies.runners.triehh import TrieHHOptions

OPTIONS = TrieHHOptions(dataset="{dataset}", users={nodes}, epsilon={epsilon}, seed={seed},
                        max_length={max_length}, transport="secagg-flower")
'''

_TRIEHHPP_CLIENT = '''"""ClientApp: this node holds one user's item, decides from the nodes' shared
participation key whether it takes part (the server cannot tell), and votes in TrieHH++'s
rounds."""
from protocol.flower.triehhpp_app import make_client_app

from .common import PKI, THREAT
from .options import OPTIONS

app = make_client_app(OPTIONS, threat=THREAT, pki=PKI, participation="key")
'''

_TRIEHHPP_SERVER = '''"""ServerApp: TrieHH++ over fedhh's secure aggregation among the nodes."""
from protocol.flower.triehhpp_app import make_server_app

from .common import PKI, THREAT
from .options import OPTIONS

app = make_server_app(OPTIONS, threat=THREAT, pki=PKI)
'''

_TRIEHHPP_OPTIONS = '''"""TrieHH++'s options: those of ``fedhh triehhpp`` (the nodes are the users)."""
from protocol.studies.runners.triehhpp import TrieHHPPOptions

OPTIONS = TrieHHPPOptions(dataset="zipf", users={nodes}, epsilon=2.0, theta=3, bound="eq3",
                          seed={seed}, max_length={max_length}, transport="secagg-flower")
'''

_RUN = '''"""Run the app in Flower's simulation engine (``python run.py``: needs Ray, from
``flwr[simulation]``) or on fedhh's in-process grid (``python run.py --local``: no Ray).
``flwr run .`` runs it through Flower's own CLI and local SuperLink."""
import importlib.util
import os
import sys

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from {module}.client_app import app as client_app  # noqa: E402
from {module}.server_app import app as server_app  # noqa: E402

NODES = {nodes}

if __name__ == "__main__":
    if "--local" in sys.argv:
        from protocol.flower.local import LocalGrid, serve

        serve(server_app, LocalGrid(client_app, NODES))
    elif importlib.util.find_spec("ray") is None:
        sys.exit("run.py: Flower's simulation engine needs Ray: pip install "
                 "'flwr[simulation]==1.42.0' (or run: python run.py --local)")
    else:
        from flwr.simulation import run_simulation

        run_simulation(server_app, client_app, num_supernodes=NODES,
                       backend_config={{"client_resources": {{"num_cpus": 1}}}})
'''

_README = '''# {name}: a Flower app with fedhh secure aggregation ({app})

Written by `fedhh flower new`. With fedhh and its Flower extra installed
(`pip install 'fedhh[flower]'`: Flower 1.42.0 and its simulation engine), from this
directory:

    {flwr_run}
    flwr ls                  # the run's status: finished:completed
    flwr log RUN_ID --show   # its log (RUN_ID: what flwr run printed)
    python run.py            # Flower's simulation engine from Python ({nodes} nodes)
    python run.py --local    # the same apps on fedhh's in-process grid (no Ray)

`flwr run` installs nothing from a package index: `[tool.uv]` in `pyproject.toml` leaves
fedhh and Flower, which the environment running Flower already holds, out of the
dependencies it installs for the run. Without a package index at all, set
`FLWR_DISABLE_UPDATE_CHECK=1` (Flower's check for a newer release) and
`RAY_USAGE_STATS_ENABLED=0`.

`pki/` holds the Ed25519 PKI of the malicious-server variant for {nodes} nodes (node `i`
is `partition-id` `i`): `roster.json` is public, `node-<i>.key` is node `i`'s secret
(left out of the app bundle `flwr run` ships). In a deployment each node keeps only its
own key and gives its path with the node config `fedhh-pki` (and its identity with
`fedhh-identity`).
{note}See fedhh's docs/flower.md.
'''


_FLWR_RUN = {
    "fedavg": ('flwr run .               # Flower\'s 2 local nodes (a quick try: no privacy)\n'
               '    flwr run . --federation-config "num-supernodes={nodes}"   # {nodes} simulated nodes'),
    "triehh": 'flwr run . --federation-config "num-supernodes={nodes}"   # one node per user',
    "triehhpp": 'flwr run . --federation-config "num-supernodes={nodes}"   # one node per user',
}

_NOTES = {
    "fedavg": ("The ServerApp aggregates every node of the federation and logs the final "
               "model as a `fedhh result:` line. A bare `flwr run .` has Flower's default "
               "2 nodes, fewer than secure aggregation needs (5 for the malicious-server "
               "default): each node then hosts several of its devices and the result is "
               "the same, but the sum of 2 hides nothing from either node (the server and "
               "one node learn the other's update). For privacy run 10 nodes or more "
               "(`num-supernodes=10`).\n"),
    "triehh": ("TrieHH's parameters follow from epsilon and the population (Corollary 1): "
               "10^4 users at epsilon 4 sample 274 users per level with theta 12 and find "
               "`the`; 1000 users sample 32 and find nothing. A run that finds nothing "
               "logs why (the threshold, the sample per level, the fewest holders a word "
               "needs).\n"),
    "triehhpp": ("TrieHH++'s sample size follows from epsilon, theta and the population "
                 "(Cormode 2021, equation (3) here: `bound=\"eq3\"` in `options.py`); "
                 "1000 users of the Zipf population at epsilon 2 contact 138 nodes per "
                 "level. The nodes' `participation.key` decides who takes part; a "
                 "deployment gives it to the nodes only, never to the server.\n"),
}


def write_project(directory: str | pathlib.Path, *, app: str = "fedavg", nodes: int = 10,
                  threat: str = "malicious", dim: int = 5, dataset: str = "en",
                  epsilon: float = 4.0, seed: int = 0, max_length: int = 10,
                  overwrite: bool = False) -> list[pathlib.Path]:
    """Write the project into ``directory`` (created); returns the files written.
    The PKI is written by the caller (:func:`protocol.flower.session.write_pki` into
    ``directory/pki``).

    Raises:
        ValueError: an unknown app, fewer than 2 nodes, or a non-empty directory
            without ``overwrite``.
    """
    if app not in APPS:
        raise ValueError(f"app must be one of {APPS}, got {app!r}")
    if nodes < 2 or dim < 1:
        raise ValueError("need at least 2 nodes and dim >= 1")
    root = pathlib.Path(directory)
    if root.exists() and any(root.iterdir()) and not overwrite:
        raise ValueError(f"{root} is not empty (pass overwrite to write into it)")
    name = re.sub(r"[^a-z0-9]+", "-", root.resolve().name.lower()).strip("-") or "fedhh-app"
    module = re.sub(r"[^a-z0-9_]", "_", name.replace("-", "_"))
    if not module or module[0].isdigit():
        module = "app_" + module
    if app == "fedavg":
        config = 'num-server-rounds = 3'
        files = {"client_app.py": _FEDAVG_CLIENT.format(dim=dim),
                 "server_app.py": _FEDAVG_SERVER}
    elif app == "triehhpp":
        config = f'nodes = {nodes}'
        files = {"client_app.py": _TRIEHHPP_CLIENT, "server_app.py": _TRIEHHPP_SERVER,
                 "options.py": _TRIEHHPP_OPTIONS.format(nodes=nodes, seed=int(seed),
                                                        max_length=int(max_length))}
    else:
        config = f'nodes = {nodes}'
        files = {"client_app.py": _TRIEHH_CLIENT, "server_app.py": _TRIEHH_SERVER,
                 "options.py": _TRIEHH_OPTIONS.format(dataset=dataset, nodes=nodes,
                                                      epsilon=float(epsilon), seed=int(seed),
                                                      max_length=int(max_length))}
    files["common.py"] = _COMMON.format(threat=threat, nodes=nodes,
                                        pki=str(root.resolve() / "pki"))
    files["__init__.py"] = '"""A Flower app with fedhh secure aggregation."""\n'
    written = []
    (root / module).mkdir(parents=True, exist_ok=True)
    for fname, text in files.items():
        path = root / module / fname
        path.write_text(text)
        written.append(path)
    for fname, text in (("pyproject.toml", _PYPROJECT.format(name=name, app=app, module=module,
                                                              config=config, nodes=nodes)),
                        ("run.py", _RUN.format(module=module, nodes=nodes)),
                        ("README.md", _README.format(name=name, app=app, nodes=nodes,
                                                     note=_NOTES[app],
                                                     flwr_run=_FLWR_RUN[app].format(
                                                         nodes=nodes)))):
        path = root / fname
        path.write_text(text)
        written.append(path)
    return written
