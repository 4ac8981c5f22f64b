"""The project ``fedhh flower new`` writes, run the way Flower's documentation teaches:
``flwr run .`` offline (its runtime installs no dependency from an index, the nodes'
keys stay out of the app bundle, Flower's configuration is only what ``flwr`` itself
writes), the ServerApp on Flower's default 2 nodes (each hosting several devices of
secure aggregation), its one-line refusal of what it cannot run, and TrieHH's defaults and its reason when it finds nothing.

The full ``flwr run .`` (a local SuperLink, Flower's simulation engine with Ray) is
slow; the rest needs Flower (and uv, which Flower brings) but no Ray."""
from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import math
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
import zipfile

import numpy as np
import pytest

flwr = pytest.importorskip("flwr")

#: what keeps every tool of a run off the network: Flower's release check and
#: telemetry, Ray's usage statistics, uv and pip pointed at nothing (closed port)
OFFLINE = {"FLWR_DISABLE_UPDATE_CHECK": "1", "FLWR_TELEMETRY_ENABLED": "0",
           "RAY_USAGE_STATS_ENABLED": "0", "UV_OFFLINE": "1", "UV_NO_CACHE": "1",
           "UV_INDEX_URL": "http://127.0.0.1:9/simple",
           "PIP_INDEX_URL": "http://127.0.0.1:9/simple"}


def _new(tmp_path: pathlib.Path, *args: str) -> pathlib.Path:
    from protocol.cli import main

    proj = tmp_path / "demo"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["flower", "new", str(proj), *args]) == 0
    return proj


def _env(home: pathlib.Path, ports: tuple[int, int] | None = None) -> dict[str, str]:
    env = {"HOME": str(home), "PATH": f"{pathlib.Path(sys.executable).parent}:/usr/bin:/bin",
           "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), **OFFLINE}
    if ports is not None:
        env["FLWR_LOCAL_SUPERLINK_HTTP_API_PORT"] = str(ports[0])
        env["FLWR_LOCAL_CONTROL_API_PORT"] = str(ports[1])
    return env


def test_the_project_declares_its_dependencies_and_keeps_them_out_of_flowers_install(
        tmp_path) -> None:  # noqa: ANN001
    proj = _new(tmp_path)
    doc = tomllib.loads((proj / "pyproject.toml").read_text())
    assert "fedhh[flower]" in doc["project"]["dependencies"]
    assert set(doc["tool"]["uv"]["exclude-dependencies"]) == {"fedhh", "flwr"}
    flower = doc["tool"]["flwr"]
    assert "federations" not in flower  # flwr would move it into the user's config
    assert flower["app"]["components"]["serverapp"] == "demo.server_app:app"
    assert flower["app"]["fab-exclude"] == ["pki/**"]
    assert "nodes" not in flower["app"]["config"]  # the federation decides


def test_flowers_runtime_install_resolves_the_project_offline(tmp_path) -> None:  # noqa: ANN001
    """What Flower 1.42's runtime runs for every ``flwr run`` (``uv sync`` into a fresh
    environment, flwr left out), here with uv offline and no index."""
    if importlib.util.find_spec("uv") is None:
        pytest.skip("uv (which Flower 1.42 brings) is not installed")
    proj = _new(tmp_path)
    env = {**_env(tmp_path), "UV_PROJECT_ENVIRONMENT": str(tmp_path / "runtime-env")}
    r = subprocess.run([sys.executable, "-m", "uv", "sync", "--python", sys.executable,
                        "--no-install-project", "--no-install-package", "flwr", "--inexact"],
                       cwd=proj, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    lock = (proj / "uv.lock").read_text()
    assert "fedhh" in lock and '[[package]]\nname = "fedhh"' not in lock  # excluded
    # and without the exclusion the same install fails: fedhh is on no index it can reach
    text = (proj / "pyproject.toml").read_text()
    (proj / "pyproject.toml").write_text(text.replace('exclude-dependencies = ["fedhh", '
                                                      '"flwr"]', ""))
    (proj / "uv.lock").unlink()
    r = subprocess.run([sys.executable, "-m", "uv", "sync", "--python", sys.executable,
                        "--no-install-project", "--no-install-package", "flwr", "--inexact"],
                       cwd=proj, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0


def test_the_app_bundle_holds_the_public_roster_only(tmp_path) -> None:  # noqa: ANN001
    from flwr.cli.build import build_fab_from_disk

    proj = _new(tmp_path, "--nodes", "5")
    with zipfile.ZipFile(io.BytesIO(build_fab_from_disk(proj))) as fab:
        names = fab.namelist()
        common = fab.read("demo/common.py").decode()
    assert "demo/server_app.py" in names and not any(n.startswith("pki/") for n in names)
    # installed from the bundle, the app finds the keys where fedhh flower new wrote them
    inst = tmp_path / "installed"
    (inst / "demo").mkdir(parents=True)
    (inst / "demo" / "common.py").write_text(common)
    spec = importlib.util.spec_from_file_location("bundled_common", inst / "demo" / "common.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert pathlib.Path(mod.PKI) == (proj / "pki").resolve()
    assert mod.NODES == 5


@contextlib.contextmanager
def _imported(proj: pathlib.Path):  # noqa: ANN202
    """The generated package ``demo`` (client and server apps), imported from ``proj``."""
    import importlib

    sys.path.insert(0, str(proj))
    try:
        pkg = importlib.import_module("demo")
        importlib.import_module("demo.client_app")
        importlib.import_module("demo.server_app")
        yield pkg
    finally:
        sys.path.remove(str(proj))
        for name in [m for m in sys.modules if m == "demo" or m.startswith("demo.")]:
            del sys.modules[name]


def test_the_server_runs_on_flowers_two_nodes_hosting_the_devices(tmp_path, caplog,  # noqa: ANN001
                                                                   monkeypatch) -> None:  # noqa: ANN001
    """Flower's local simulation has 2 nodes unless told otherwise: they host the 5
    devices of the malicious default, the result is the plaintext FedAvg's, and the log
    says plainly that 2 nodes give no privacy."""
    import logging

    from protocol.flower.local import LocalGrid, serve

    proj = _new(tmp_path)
    monkeypatch.setattr(logging.getLogger("flwr"), "propagate", True)
    with _imported(proj) as demo, caplog.at_level(logging.INFO, logger="flwr"):
        serve(demo.server_app.app, LocalGrid(demo.client_app.app, 2))
    text = caplog.text
    result = json.loads(text.split("fedhh result: ")[1].splitlines()[0])
    assert (result["nodes"], result["rounds"]) == (2, 3)
    w, b = _plain_fedavg(proj, 2, 3)
    assert np.max(np.abs(np.array(result["w"]) - w)) < 2e-3
    assert abs(result["b"][0] - b) < 2e-3 and np.max(np.abs(w)) > 0.01
    assert "2 nodes host the 5 devices" in text
    assert "the server and 1 of them learn the last one's update" in text
    assert 'num-supernodes=10"' in text


def test_the_server_refuses_what_it_cannot_run_in_one_line(tmp_path) -> None:  # noqa: ANN001
    from protocol.flower.local import LocalGrid

    proj = _new(tmp_path)
    with _imported(proj) as demo, pytest.raises(RuntimeError) as err:
        demo.server_app.federation_nodes(LocalGrid(demo.client_app.app, 1), wait=0)
    assert "\n" not in str(err.value) and "at least 2 nodes, got 1" in str(err.value)
    assert 'flwr run . --federation-config "num-supernodes=10"' in str(err.value)
    small = _new(tmp_path / "small", "--nodes", "3")  # a PKI of 3 identities
    with _imported(small) as demo, pytest.raises(RuntimeError) as err:
        demo.server_app.federation_nodes(LocalGrid(demo.client_app.app, 2), wait=0)
    assert "2 nodes (5 devices of secure aggregation) and pki/ holds keys for 3" in str(err.value)


def test_run_py_says_in_one_line_what_the_simulation_engine_needs(tmp_path) -> None:  # noqa: ANN001
    proj = _new(tmp_path, "--nodes", "5")
    hide = tmp_path / "noray"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(
        "import importlib.util as u\n_f = u.find_spec\n"
        "u.find_spec = lambda name, *a, **k: None if name == 'ray' else _f(name, *a, **k)\n")
    env = _env(tmp_path)
    env["PYTHONPATH"] = f"{hide}{os.pathsep}{env['PYTHONPATH']}"
    r = subprocess.run([sys.executable, str(proj / "run.py")], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == [
        "run.py: Flower's simulation engine needs Ray: pip install "
        "'flwr[simulation]==1.42.0' (or run: python run.py --local)"]


def test_the_flower_extra_brings_the_simulation_engine() -> None:
    root = pathlib.Path(__file__).resolve().parents[2]
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert "flwr[simulation]==1.42.0" in extras["flower"]


# -- TrieHH's defaults and its reason when nothing is found ---------------------------


def test_triehh_defaults_are_a_population_that_finds_heavy_hitters() -> None:
    from protocol.cli import build_parser
    from protocol.cli.commands.flower import TRIEHH_USERS
    from protocol.core.contract import plaintext_transport
    from protocol.studies.runners import triehh
    from protocol.studies.runners.triehh import TrieHHOptions

    args = build_parser().parse_args(["flower", "triehh"])
    assert (args.users, args.epsilon, args.dataset) == (TRIEHH_USERS, 4.0, "en")
    # fedhh triehh with those options (the Flower app releases the same: see
    # test_flower_apps.py) finds heavy hitters, at a seed other than the default too
    out = triehh.run(TrieHHOptions(dataset="en", users=TRIEHH_USERS, epsilon=4.0, seed=1,
                                   transport="plain"), plaintext_transport())
    assert out["heavy_hitters"]


def test_the_triehh_template_defaults_to_that_population(tmp_path, capsys) -> None:  # noqa: ANN001
    from protocol.cli import main
    from protocol.cli.commands.flower import TRIEHH_USERS

    proj = tmp_path / "tri"
    assert main(["flower", "new", str(proj), "--app", "triehh", "--threat",
                 "semi-honest"]) == 0  # semi-honest: no PKI to write for 10^4 nodes
    opts = (proj / "tri" / "options.py").read_text()
    assert f"users={TRIEHH_USERS}, epsilon=4.0" in opts
    assert f'num-supernodes={TRIEHH_USERS}"' in capsys.readouterr().out
    # a population TrieHH cannot run at is refused before anything is written
    assert main(["flower", "new", str(tmp_path / "small"), "--app", "triehh", "--nodes",
                 "300"]) == 2
    err = capsys.readouterr().err
    assert "--nodes 300: condition 1 <= gamma fails" in err and "\n" not in err.strip()
    assert not (tmp_path / "small").exists()


def test_a_run_that_finds_nothing_says_why(capsys) -> None:  # noqa: ANN001
    from protocol.cli import main

    assert main(["flower", "triehh", "--users", "1000", "--seed", "1", "--no-compare",
                 "--threat", "semi-honest"]) == 0
    out = capsys.readouterr().out
    line = [ln.strip() for ln in out.splitlines() if "no heavy hitters" in ln]
    assert line == [
        "no heavy hitters: a prefix needs theta = 10 votes among the 32 users sampled per "
        "level, so a word must be held by at least 10 of the 1000 users to pass at all and "
        "by about 313 (31 %) to pass in expectation; the most common word, 'the', has "
        f"{_holders('the', 1000, 1)} of the 1000 users (more users or a larger epsilon "
        "lower the bar)"]


def _holders(word: str, users: int, seed: int) -> int:
    from protocol.studies.runners import triehh
    from protocol.studies.runners.triehh import TrieHHOptions

    prep, _ = triehh.prepare(TrieHHOptions(dataset="en", users=users, seed=seed))
    return int(prep.population.holders()[prep.population.vocabulary.index(word)])


def test_the_reason_follows_the_parameters() -> None:
    from protocol.flower.triehh_app import none_found_reason
    from protocol.studies.runners import triehh
    from protocol.studies.runners.triehh import TrieHHOptions

    prep, _ = triehh.prepare(TrieHHOptions(dataset="en", users=2000, epsilon=4.0, seed=0))
    theta, n = prep.config.theta, prep.n
    msg = none_found_reason(prep, 60)
    assert f"theta = {theta} votes among the 60 users" in msg
    assert f"by about {math.ceil(theta * n / 60)} " in msg
    assert "no user was sampled" in none_found_reason(prep, 0)


@pytest.mark.slow  # about 30 s: 10^4 nodes on the in-process grid, four levels of 274
def test_the_default_flower_triehh_run_finds_heavy_hitters(capsys) -> None:  # noqa: ANN001
    from protocol.cli import main

    assert main(["flower", "triehh", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["users"] == 10000 and out["heavy_hitters"] == ["the"]
    assert out["same_heavy_hitters"] is True


# -- flwr run . ----------------------------------------------------------------------


def _free_ports(k: int) -> tuple[int, ...]:
    socks = [socket.socket() for _ in range(k)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return tuple(s.getsockname()[1] for s in socks)
    finally:
        for s in socks:
            s.close()


def _stop_local_superlink(home: pathlib.Path) -> None:
    """End the SuperLink ``flwr run`` started detached for this test (its command
    line names this test's home) and its process group (SuperExec, simulation)."""
    for d in pathlib.Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "flower-superlink" in cmd and str(home) in cmd:
            pid = int(d.name)
            with contextlib.suppress(ProcessLookupError):
                if os.getpgid(pid) == pid:
                    os.killpg(pid, signal.SIGTERM)
                else:
                    os.kill(pid, signal.SIGTERM)


def _wait_finished(flwr_cli: str, run_id: str, env: dict, cwd: pathlib.Path,
                   timeout: float = 600.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        r = subprocess.run([flwr_cli, "list", "--run-id", run_id, "--format", "json"],
                           cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
        runs = json.loads(r.stdout)["runs"] if r.returncode == 0 else []
        if runs and runs[0]["status"].startswith("finished"):
            return runs[0]
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} did not finish: {r.stdout[-500:]}")
        time.sleep(2)


def _plain_fedavg(proj: pathlib.Path, nodes: int, rounds: int) -> tuple[np.ndarray, float]:
    """The generated app's FedAvg in plaintext: its nodes' data and step, equal weights."""
    with _imported(proj) as demo:
        node_data, dim = demo.client_app.node_data, demo.client_app.DIM
    w, b = np.zeros(dim), 0.0
    for _ in range(rounds):
        ws, bs = [], []
        for pid in range(nodes):
            x, y = node_data(pid)
            g = 1.0 / (1.0 + np.exp(-(x @ w + b))) - y
            ws.append(w - 0.5 * (x.T @ g) / len(y))
            bs.append(b - 0.5 * g.mean())
        w, b = np.mean(ws, axis=0), float(np.mean(bs))
    return w, b


@pytest.mark.slow  # about 1 to 2 min: a local SuperLink, Flower's simulation engine (Ray), 2 runs
def test_flwr_run_dot_completes_offline_and_matches_plaintext(tmp_path) -> None:  # noqa: ANN001
    if importlib.util.find_spec("ray") is None:
        pytest.skip("Flower's simulation engine needs Ray (flwr[simulation])")
    flwr_cli = shutil.which("flwr", path=str(pathlib.Path(sys.executable).parent))
    if flwr_cli is None:
        pytest.skip("the flwr command is not beside this Python")
    proj = _new(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    env = _env(home, _free_ports(2))
    before = (proj / "pyproject.toml").read_text()
    try:
        def run(*extra: str) -> dict:
            r = subprocess.run([flwr_cli, "run", ".", *extra], cwd=proj, env=env,
                               capture_output=True, text=True, timeout=300)
            assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
            run_id = r.stdout.split("Successfully started run ")[1].split()[0]
            return _wait_finished(flwr_cli, run_id, env, proj)

        def result_of(done: dict, nodes: int) -> str:
            assert done["status"] == "finished:completed", done["status-details"]
            log = subprocess.run([flwr_cli, "log", done["run-id"], "--show"], cwd=proj,
                                 env=env, capture_output=True, text=True, timeout=120).stdout
            assert "No additional application dependencies needed installation." in log
            result = json.loads(log.split("fedhh result: ")[1].splitlines()[0])
            assert (result["nodes"], result["rounds"]) == (nodes, 3)
            w, b = _plain_fedavg(proj, nodes, 3)
            # each round's mean is within a few quantisation units (2c/Q per node)
            assert np.max(np.abs(np.array(result["w"]) - w)) < 2e-3
            assert abs(result["b"][0] - b) < 2e-3
            assert np.max(np.abs(w)) > 0.01  # the plaintext run moved: the check can fail
            return log

        # a bare `flwr run .`: Flower's default federation of 2 nodes hosts the 5
        # devices of the malicious-server default, and the log says it hides nothing
        log = result_of(run(), 2)
        assert "fedhh: 2 nodes host the 5 devices" in log
        assert "the server and 1 of them learn the last one's update" in log
        assert 'for privacy: flwr run . --federation-config "num-supernodes=10"' in log

        # the run the log recommends: 10 nodes, one device each
        log = result_of(run("--federation-config", "num-supernodes=10"), 10)
        assert "nodes host" not in log and "learn the last one's update" not in log
    finally:
        _stop_local_superlink(home)
    # flwr wrote only its own default configuration, and the project is unchanged
    config = tomllib.loads((home / ".flwr" / "config.toml").read_text())
    assert set(config["superlink"]) == {"default", "supergrid", "local"}
    assert (proj / "pyproject.toml").read_text() == before
