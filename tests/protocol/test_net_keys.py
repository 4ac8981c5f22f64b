"""One key directory per party: ``fedhh keys`` writes them, and every networked process
refuses a directory that holds another party's secret key."""
from __future__ import annotations

import io
import subprocess
import sys

import pytest

from protocol.core.net import tls
from secagg import crypto
from protocol.core.net.processes import (
    client_process, helper_process, serve_process, threshold_client_process,
    threshold_serve_process,
)
from protocol.core.net.session import NetSessionSpec
from protocol.core.net.shuffle import ShuffleRound
from protocol.core.net.threshold_net import ThresholdRound

N = 6


@pytest.fixture(scope="module")
def parties(tmp_path_factory):
    return tls.make_party_keys(tmp_path_factory.mktemp("parties"), N, committee=True)


def test_each_directory_holds_only_its_own_secrets(parties) -> None:
    files = {p: sorted(f.name for f in d.iterdir()) for p, d in parties.items()}
    assert "server.key" in files["server"] and "signing.keys" not in files["server"]
    for p in ("clients", "helper1", "helper2"):
        assert "server.key" not in files[p] and "server.crt" in files[p]
    assert [f for f in files["helper1"] if f.endswith(".key")] == ["helper1.key"]
    assert [f for f in files["helper2"] if f.endswith(".key")] == ["helper2.key"]
    assert not [f for f in files["clients"] if f.endswith(".key")]
    verify, signing = tls.load_pki(parties["clients"])
    assert len(verify) == N + 2
    assert all(k is not None for k in signing[:N]) and signing[N:] == [None, None]
    for h, pos in (("helper1", N), ("helper2", N + 1)):
        owned = [i for i, k in enumerate(tls.load_pki(parties[h])[1]) if k is not None]
        assert owned == [pos]
    # all directories share one roster and one server certificate
    rosters = {(d / "roster.json").read_text() for d in parties.values()}
    certs = {(d / "server.crt").read_bytes() for d in parties.values()}
    assert len(rosters) == 1 and len(certs) == 1
    for h in ("helper1", "helper2"):
        assert (parties["server"] / f"{h}.crt").read_bytes() == \
            (parties[h] / f"{h}.crt").read_bytes()


def test_each_helper_alone_holds_its_report_key_and_every_roster_its_public_half(
        parties, tmp_path) -> None:
    import shutil

    for p, d in parties.items():
        held = sorted(f.name for f in d.iterdir() if f.name.endswith(".x25519"))
        assert held == ([f"{p}.x25519"] if p.startswith("helper") else [])
        assert tls.load_report_keys(d) == tls.load_report_keys(parties["server"])
    for i in (1, 2):
        secret = tls.load_report_secret(parties[f"helper{i}"], i)
        assert crypto.x25519_public(secret) == tls.load_report_keys(parties["server"])[i - 1]
        assert (tls.report_secret_path(parties[f"helper{i}"], i).stat().st_mode & 0o077) == 0
    with pytest.raises(ValueError, match="missing"):
        tls.load_report_secret(parties["helper1"], 2)   # not helper 1's to hold
    # a directory that holds the other helper's report key is refused
    stray = tmp_path / "helper1"
    shutil.copytree(parties["helper1"], stray)
    shutil.copy(tls.report_secret_path(parties["helper2"], 2), stray)
    with pytest.raises(tls.ForeignKeyError, match="X25519 report secret"):
        tls.check_own_keys(stray, "helper1", {N})
    # a secret the roster does not publish is refused
    tls.report_secret_path(stray, 1).write_bytes(bytes(32))
    with pytest.raises(ValueError, match="not helper 1's"):
        tls.load_report_secret(stray, 1)
    # keys made without a committee publish none
    tls.make_party_keys(tmp_path / "plain", 3)
    with pytest.raises(ValueError, match="no helper report keys"):
        tls.load_report_keys(tmp_path / "plain" / "clients")


@pytest.mark.parametrize("party, holder, own", [
    ("server", "clients", ()), ("server", "helper1", ()), ("clients", "server", range(N)),
    ("clients", "helper2", range(N)), ("helper1", "helper2", {N}),
    ("helper2", "clients", {N + 1}), ("helper1", "server", {N})])
def test_another_partys_directory_is_refused(parties, party, holder, own) -> None:
    with pytest.raises(tls.ForeignKeyError) as info:
        tls.check_own_keys(parties[holder], party, own)
    assert str(parties[holder]) in str(info.value)


def test_own_directories_pass(parties) -> None:
    tls.check_own_keys(parties["server"], "server")
    tls.check_own_keys(parties["clients"], "clients", range(N))
    tls.check_own_keys(parties["helper1"], "helper1", {N})
    tls.check_own_keys(parties["helper2"], "helper2", {N + 1})


def test_the_single_directory_layout_is_refused_by_every_party(tmp_path) -> None:
    """The layout every party used to share: server key, helper keys and every signing
    key in one place."""
    tls.make_keys(tmp_path, N + 2)
    tls.make_helper_keys(tmp_path)
    for party, own in (("server", ()), ("clients", range(N)), ("helper1", {N}),
                       ("helper2", {N + 1})):
        with pytest.raises(tls.ForeignKeyError):
            tls.check_own_keys(tmp_path, party, own)


def test_processes_refuse_foreign_keys_before_they_start(parties) -> None:
    rnd = ThresholdRound(ShuffleRound(N, candidates=4, theta=2))
    out = io.StringIO()
    spec = NetSessionSpec(N + 2, dim=4, modulus=1 << 8)
    calls = [
        lambda: serve_process(spec, str(parties["clients"]), out=out),
        lambda: client_process(spec, str(parties["server"]), "127.0.0.1", 9, [0], out=out),
        lambda: threshold_serve_process(rnd, str(parties["helper1"]), out=out),
        lambda: helper_process(1, rnd, str(parties["helper2"]), "127.0.0.1", 9,
                               ("127.0.0.1", 9), out=out),
        lambda: helper_process(2, rnd, str(parties["clients"]), "127.0.0.1", 9,
                               ("127.0.0.1", 9), out=out),
        lambda: threshold_client_process(rnd, str(parties["helper1"]), "127.0.0.1", 9, [0],
                                         out=out),
    ]
    for call in calls:
        with pytest.raises(tls.ForeignKeyError):
            call()
    assert out.getvalue() == ""


def test_a_process_needs_the_signing_keys_of_the_positions_it_runs(parties) -> None:
    from protocol.core.net.processes import _roster

    with pytest.raises(ValueError, match="no signing key for position 0"):
        # helper 1's directory holds only position N's key
        _roster(str(parties["helper1"]), N + 2, True, party="helper1", own={N}, runs=[0])
    verify, signing = _roster(str(parties["clients"]), N + 2, True, party="clients",
                              own=range(N), runs=range(N))
    assert len(verify) == N + 2 and signing is not None


def test_keys_command_writes_party_directories_and_refuses_to_overwrite(tmp_path) -> None:
    cmd = [sys.executable, "-m", "protocol.cli", "keys", "--out", str(tmp_path / "k"),
           "--clients", "4", "--committee"]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    assert sorted(p.name for p in (tmp_path / "k").iterdir()) == sorted(tls.PARTIES)
    assert "give it to that party only" in first.stdout
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert again.returncode == 2 and "--force" in again.stderr
    assert "Traceback" not in again.stderr
