"""``fedhh bench poplar1``: the heavy-hitters benchmark on a tiny population, and the
reference comparison's refusals (the draft's reference itself is not in the repository;
docs/poplar1.md gives the command that measured it)."""
from __future__ import annotations

import json

import pytest

from protocol.cli import main


def test_bench_hh_small(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "poplar1", "--hh", "--users", "120", "--chars", "2",
                 "--support", "20", "--threshold", "10"]) == 0
    out = json.loads(capsys.readouterr().out)
    (run,) = out["runs"]
    assert run["bits"] == 16 and run["n"] == 120 and run["levels"] >= 1
    assert run["cpu_seconds"] > 0 and "peak_rss_mb" in out
    assert run["true_top_k_found"] >= 1
    assert len(run["load_average"]) == 2


def test_bench_field(capsys: pytest.CaptureFixture[str]) -> None:
    """--field times every representation and checks each against Python's integers."""
    assert main(["bench", "poplar1", "--field", "--reports", "440", "--repeats", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["clock"] == "process_time" and out["elements"] == 440
    for table in ("ns_per_product", "ns_per_dot_pair"):
        assert {"python ints", "numpy object arrays", "fedhh limbs",
                "Field64 (uint64)"} <= set(out[table]) and min(out[table].values()) > 0
    assert main(["bench", "poplar1", "--field", "--reports", "10"]) == 2


def test_bench_levels(capsys: pytest.CaptureFixture[str]) -> None:
    """--levels: CPU per report of the last inner level and the leaf, counts checked."""
    assert main(["bench", "poplar1", "--levels", "--reports", "40", "--bits", "3",
                 "--candidates", "4", "--repeats", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["bits"] == 3 and out["clock"] == "process_time"
    from protocol.core.poplar1 import jit
    assert out["kernels"] == jit.kernels()
    assert set(out["us_per_report_and_aggregator"]) == {"inner", "leaf"}
    assert main(["bench", "poplar1", "--levels", "--bits", "1"]) == 2


def test_bench_table_from_json(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    """--table renders earlier --hh outputs (sorted by bits, then n) and refuses what is
    not one."""
    assert main(["bench", "poplar1", "--hh", "--users", "60,30", "--chars", "1",
                 "--support", "8", "--threshold", "5"]) == 0
    f = tmp_path / "hh.json"
    f.write_text(capsys.readouterr().out)
    assert main(["bench", "poplar1", "--table", str(f)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("| n |") and len(lines) == 4
    assert lines[2].startswith("| 30 | 1 (8) | ") and lines[3].startswith("| 60 | 1 (8) | ")
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert main(["bench", "poplar1", "--table", str(bad)]) == 2
    assert main(["bench", "poplar1", "--table", str(tmp_path / "missing.json")]) == 2


def test_bench_reference_refusals(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    assert main(["bench", "poplar1"]) == 2                       # neither --reference nor --hh
    assert main(["bench", "poplar1", "--reference", str(tmp_path)]) == 2   # no vdaf_poc there
    assert "vdaf_poc" in capsys.readouterr().err
    # 256 bits is a valid length here (the shared "bits" rule of other commands stops at 64)
    assert main(["bench", "poplar1", "--reference", str(tmp_path), "--bits", "256"]) == 2
    err = capsys.readouterr().err
    assert "vdaf_poc" in err and "--bits" not in err
    assert main(["bench", "poplar1", "--hh", "--users", "x"]) == 2
    capsys.readouterr()
    # --bits: the draft's range, one line each; with --hh refused with the reason
    for bad in ("0", "65536", "-3", "x"):
        assert main(["bench", "poplar1", "--reference", str(tmp_path), "--bits", bad]) == 2
        err = capsys.readouterr().err
        assert "--bits must be" in err and len(err.strip().splitlines()) == 1
    for bits in ("0", "8"):
        assert main(["bench", "poplar1", "--hh", "--bits", bits]) == 2
        err = capsys.readouterr().err
        assert "--bits does not apply to --hh" in err and "--chars" in err
    # BITS = 1 is valid (the draft's minimum): it reaches the reference loader
    assert main(["bench", "poplar1", "--reference", str(tmp_path), "--bits", "1"]) == 2
    assert "vdaf_poc" in capsys.readouterr().err


def test_reference_table_rows() -> None:
    """The reference comparison's table: one row per measured step with its ratio, the
    XOF alone, the load; documents of both kinds at once are refused."""
    from protocol.studies.errors import StudyError
    from protocol.studies.runners.poplar1 import bench_table

    step = {"ours_us_per_report": 10.0, "reference_us_per_report": 1000.0, "speedup": 100.0}
    doc = {"bits": 32, "shard": step, "load_average": [1.5, 2.0],
           "prep": {"level 15": dict(step, candidates=16)},
           "xof_us_per_message": {"pycryptodome_one_call": 20.0, "numpy_sponge_batch": 5.0,
                                  "batch": 1000}}
    lines = bench_table([doc])
    assert lines[2] == "| 32 | client sharding | 10 | 1,000 | 100x | 1.5 to 2 |"
    assert "level 15" in lines[3] and "| 4.0x |" in lines[4]
    assert "batched sponge (numpy)" in lines[4]  # no "kernels": an output of the numpy code
    assert "batched sponge (compiled)" in bench_table([dict(doc, kernels="numba 0.68.1")])[4]
    with pytest.raises(StudyError):
        bench_table([doc, {"runs": []}])


def test_docs_tables_are_the_committed_results() -> None:
    """docs/poplar1.md's measured tables are what ``bench poplar1 --table`` renders from
    the JSON committed in docs/results/poplar1/ and the compare runs' own table.md."""
    import pathlib

    from protocol.studies.runners.poplar1 import bench_table

    root = pathlib.Path(__file__).resolve().parents[2]
    page = (root / "docs" / "poplar1.md").read_text(encoding="utf-8")
    res = root / "docs" / "results" / "poplar1"

    def load(*names: str) -> list:
        return [json.loads((res / n).read_text(encoding="utf-8")) for n in names]

    ref = bench_table(load("ref32.json", "ref256.json"))
    hh = bench_table(load("hh_3000_32.json", "hh_10000_32.json", "hh_1e5_256.json",
                          "hh_10000_8.json", "hh_10000_16.json"))
    mem = bench_table(load("hh_1e4_256_before.json", "hh_1e4_256_memory.json",
                           "hh_1e4_256_files.json", "hh_1e4_256_parked.json"))
    state = bench_table(load("state_8192_256.json"))
    aes = bench_table(load(*(f"aes_proc_1e4/hh_1e4_64_{x}_run1.json" for x in (
        "aes-contexts_processes-no", "aes-openssl_processes-no", "aes-openssl_processes-yes",
        "files", "parked"))))
    again = bench_table(load("hh_1e5_256.json", "hh_1e5_256_processes.json"))
    for table in (ref, hh, mem, state, aes, again):
        assert "\n".join(table) in page
    for name, row, kernels in (
            ("levels_8192_16_44_before.json", "| Python-integer leaf (before) |", None),
            ("levels_8192_16_44_numpy.json", "| numpy code (`FEDHH_JIT=0`) |", "numpy"),
            ("levels_8192_16_44_kernels_before.json",
             "| compiled kernels, numpy Field255 at the leaf (before) |", "numba"),
            ("levels_8192_16_44.json", "| compiled kernels (numba, the default) |", "numba")):
        d = load(name)[0]
        assert kernels is None or d["kernels"].startswith(kernels)
        us = d["us_per_report_and_aggregator"]
        assert f"{row} {us['inner']} us | {us['leaf']} us |" in page
    for d in ("cmp_en_1e4", "cmp_zipf_1e4", "cmp_zipf_1e5"):
        assert (res / d / "table.md").read_text(encoding="utf-8").strip() in page
