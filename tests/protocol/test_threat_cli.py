"""--threat on the commands and benches that make a secure-aggregation session."""
from __future__ import annotations

import argparse
import json

import pytest

from protocol.cli import UsageError, main
from protocol.cli.transport_options import add_transport_args, transport_from_args
from protocol.studies.runners.demo import server_guarantee as _server_guarantee


def _args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--seed", type=int, default=None)
    add_transport_args(p)
    return p.parse_args(argv)


def test_transport_threat_option_default_and_alias() -> None:
    assert transport_from_args(_args(["--transport", "secagg"])).threat == "malicious"
    t = transport_from_args(_args(["--transport", "secagg", "--threat", "semi-honest"]))
    assert (t.threat, t.malicious) == ("semi-honest", False)
    t = transport_from_args(_args(["--transport", "secagg", "--secagg-malicious"]))
    assert (t.threat, t.malicious) == ("malicious", True)
    t = transport_from_args(_args(["--transport", "secagg", "--secagg-malicious",
                                   "--threat", "malicious"]))
    assert t.threat == "malicious"


def test_threshold_committee_transport_defaults_to_malicious() -> None:
    assert transport_from_args(_args(["--transport", "threshold"])).malicious is True
    t = transport_from_args(_args(["--transport", "threshold", "--threat", "semi-honest"]))
    assert t.malicious is False


@pytest.mark.parametrize("argv, msg", [
    (["--transport", "secagg", "--threat", "semi-honest", "--secagg-malicious"],
     "--secagg-malicious contradicts --threat semi-honest"),
    (["--threat", "malicious"], "--threat applies to --transport secagg or threshold, not plain"),
    (["--transport", "shuffler", "--threat", "semi-honest"], "--threat applies"),
])
def test_threat_refusals(argv: list[str], msg: str) -> None:
    with pytest.raises(UsageError, match=msg):
        transport_from_args(_args(argv))


def test_bench_secagg_reports_the_threat_model(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["bench", "secagg", "--clients", "30", "--dim", "8", "--seed", "1", "--json",
            "--bare-sample", "5", "--graph", "complete"]
    assert main(base) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["threat"] == "malicious" and out["malicious"] is True and out["correct"]
    # n = 30 complete, K = ceil(0.05 * 30) = 2: the smallest t with 2t > 29 + 2
    assert (out["degree"], out["threshold"]) == (29, 16)
    assert out["min_honest"] == 16 + 1 - 2 and out["alpha"] == round(15 / 30, 4)
    assert out["log2_security_failure"] is not None and out["corrupt_fraction"] == 0.05
    # the round's CPU cannot be below its X25519 operations' bare cost
    assert out["floor_ratio"] is not None and out["floor_ratio"] >= 1.0
    # with only the bare primitives costing CPU: every family's bare cost over the
    # X25519 one (>= 1; below floor_ratio in expectation, but both are timed apart, on
    # 5 sampled operations here, so their order is not asserted)
    bare = {k: v["bare_seconds"] for k, v in out["primitives"].items()}
    assert out["primitive_floor_ratio"] == pytest.approx(
        sum(bare.values()) / bare["key_agreement"], abs=0.05)
    assert out["primitive_floor_ratio"] >= 1.0
    assert out["memory_per_client_kb"] >= 0.0
    assert main(base + ["--threat", "semi-honest"]) == 0
    semi = json.loads(capsys.readouterr().out)
    assert (semi["threat"], semi["threshold"], semi["min_honest"]) == \
        ("semi-honest", 3, 30 - 2 - 2)
    assert main(base + ["--malicious"]) == 0
    assert json.loads(capsys.readouterr().out)["threat"] == "malicious"
    assert main(base + ["--malicious", "--threat", "semi-honest"]) == 2
    assert "--malicious contradicts --threat semi-honest" in capsys.readouterr().err


def test_bench_secagg_compare_threats_splits_the_price(
        capsys: pytest.CaptureFixture[str]) -> None:
    base = ["bench", "secagg", "--clients", "40", "--dim", "8", "--seed", "1",
            "--bare-sample", "5", "--compare-threats", "--repeats", "2"]
    assert main(base + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    s = out["sessions"]
    mal, semi = s["malicious"], s["semi-honest"]
    same = s["semi-honest-at-malicious-parameters"]
    assert (mal["threat"], semi["threat"], same["threat"]) == \
        ("malicious", "semi-honest", "semi-honest")
    assert (same["degree"], same["threshold"]) == (mal["degree"], mal["threshold"])
    assert (semi["degree"], semi["threshold"]) != (mal["degree"], mal["threshold"])
    assert all(v["correct"] and len(v["cpu_seconds"]) == 2 for v in s.values())
    assert mal["signature_seconds_median"] > 0 == semi["signature_seconds_median"]
    r = out["ratios"]
    assert r["malicious_over_semi_honest"] == round(
        mal["cpu_seconds_median"] / semi["cpu_seconds_median"], 3)
    assert r["protocol"] == round(
        mal["cpu_seconds_median"] / same["cpu_seconds_median"], 3)
    assert main(base + ["--threat", "semi-honest"]) == 2
    assert "--compare-threats runs both threat models" in capsys.readouterr().err
    assert main(base[:-1] + ["0"]) == 2
    assert "--repeats: must be >= 1" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["triehh"], ["triehhpp"], ["ldp", "--oracle", "grr"],
                                     ["bench", "triehh"], ["eval", "triehh"], ["demo"]])
def test_every_secagg_command_takes_threat(command: list[str],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(command + ["--help"])
    assert exc.value.code == 0
    assert "--threat {malicious,semi-honest}" in capsys.readouterr().out


def test_demo_states_what_holds_not_never_an_individual_vote() -> None:
    mal = _server_guarantee("malicious", 200)
    assert "never an individual vote" not in mal
    # n = 200 Harary, k = 30, t = 21: m = 4 disjoint windows, 4 * 22 - 10 = 78
    assert "at least 78 honest users of the 200 sampled (k = 30, t = 21)" in mal
    semi = _server_guarantee("semi-honest", 200)
    assert "can recover an individual vote" in semi
