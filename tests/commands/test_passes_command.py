"""``ktx passes``: the listing, and the Markdown reference."""

from __future__ import annotations

import pytest

from ktx.cli import main


def test_lists_every_pass_with_knobs_options_and_ordering(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["passes"]) == 0
    out = capsys.readouterr().out
    for name in ("expose", "block-size", "unroll", "launch-bounds", "coarsen", "split", "tile"):
        assert f"\n{name}: " in f"\n{out}"
    assert "  knob UNROLL_<loop>:" in out
    assert "  option sizes (ints, default 2|4|8)" in out
    assert "  requires block-size; after block-size, expose" in out
    assert "conflicts coarsen" in out


def test_markdown_reference(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["passes", "--markdown"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# Pass reference\n")
    assert "| [`split`](#split) |" in out
    assert "\n## tile\n" in out
    assert "| `sizes` | ints | `2\\|4\\|8` |" in out


def test_the_listing_and_reference_show_each_pass_phase(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["passes"]) == 0
    assert "  after expose; phase block\n" in capsys.readouterr().out
    assert main(["passes", "--markdown"]) == 0
    assert "| [`row-owner`](#row-owner) | ownership |" in capsys.readouterr().out
