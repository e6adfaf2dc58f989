"""Options and the positional argument go in any order, in every command (issue 14, bad input)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ktx.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[2]
SILU = ROOT / "kernels" / "silu_and_mul" / "kernel.cu"


def test_config_before_the_file_does_not_swallow_it(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["apply", "--passes", "block-size", "--config", "BLOCK_X=64", str(SILU), "-q"])
    out = capsys.readouterr().out
    assert code == 0 and "dim3 block(64);" in out
    code = main(["apply", "--config", "BLOCK_X=32", str(SILU), "--passes", "block-size", "-q"])
    assert code == 0 and "dim3 block(32);" in capsys.readouterr().out
    # The same knob twice is an error since issue 21 (the last one used to win silently).
    code = main(["apply", "--config", "BLOCK_X=64", "BLOCK_X=32", str(SILU), "--passes", "block-size", "-q"])
    assert code == 2 and "BLOCK_X is given twice" in capsys.readouterr().err


def test_a_missing_file_and_a_stray_word_are_one_line_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["apply", "--passes", "block-size", "--config", "BLOCK_X=64"]) == 2
    want = "ktx: error: the CUDA source FILE is missing (ktx apply --passes PIPELINE FILE)\n"
    assert capsys.readouterr().err == want
    assert main(["apply", "--passes", "block-size", "--config", "oops", "BLOCK_X=64", str(SILU)]) == 2
    assert "--config 'oops' is not NAME=VALUE" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (["run", "--shape", "quick", "--no-odd", "K"], ["run", "K", "--shape", "quick", "--no-odd"]),
        (["bench", "--kernel", "x", "--json", "f", "K"], ["bench", "K", "--kernel", "x", "--json", "f"]),
        (["tune", "--passes", "split", "--trials", "3", "K"],
         ["tune", "K", "--passes", "split", "--trials", "3"]),
        (["optimize", "--rounds", "2", "K"], ["optimize", "K", "--rounds", "2"]),
        (["report", "--out", "o", "K"], ["report", "K", "--out", "o"]),
        (["inspect", "--json", "K"], ["inspect", "K", "--json"]),
        (["init", "--kernel", "k", "--out", "o", "K"], ["init", "K", "--kernel", "k", "--out", "o"]),
        (["export", "--torch", "-o", "o", "K"], ["export", "K", "--torch", "-o", "o"]),
        (["apply", "--passes", "split", "--config", "A=1", "K"],
         ["apply", "K", "--passes", "split", "--config", "A=1"]),
    ],
)  # fmt: skip
def test_every_command_parses_options_before_and_after(before: list[str], after: list[str]) -> None:
    parser = build_parser()
    a, b = parser.parse_args(before), parser.parse_args(after)
    assert vars(a) == vars(b) or a.command == "apply"
    if a.command == "apply":  # the positional is recovered from --config's list in run()
        assert (a.file, a.config) == (None, ["A=1", "K"]) and (b.file, b.config) == ("K", ["A=1"])


def test_debug_goes_anywhere() -> None:
    parser = build_parser()
    assert parser.parse_args(["inspect", "K", "--debug"]).debug is True
    assert parser.parse_args(["--debug", "inspect", "K"]).debug is True
    assert parser.parse_args(["inspect", "K"]).debug is False
