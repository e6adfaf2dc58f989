"""Pass registration: metadata checks, name clashes, entry points and plugins."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ktx.ir.errors import KtxError

import ktx.registry as registry_module
from ktx.passbase import KnobSpec, Option, Pass, Rewriter, Site, Skip, Target
from ktx.registry import PassDefinitionError, Registry, check_pass, load_plugin

ROOT = Path(__file__).resolve().parents[1]


class Good(Pass[Site]):
    name = "good-pass"
    summary = "a well-formed pass"
    knobs = (KnobSpec("GOOD_<loop>", "1, 2", "1", "a knob"),)
    options = (Option("max", "int", 4, "a bound"), Option("loops", "strs", (), "loops"))
    after = ("unroll",)

    def sites(self, target: Target) -> Iterator[Site | Skip]:
        yield Skip("nothing", target.kernel.name)

    def rewrite(self, site: Site, rw: Rewriter) -> None:  # pragma: no cover
        raise AssertionError


def variant(**attrs: Any) -> type[Pass[Any]]:
    return type("Variant", (Good,), attrs)


def test_a_good_pass_registers_and_instantiates_with_defaults() -> None:
    reg = Registry()
    reg.register(Good)
    assert reg.get("good-pass") is Good
    assert Good().values == {"max": 4, "loops": ()}
    assert Good(max=8).describe() == "good-pass{max=8}"
    with pytest.raises(KtxError, match="has no option 'nope'"):
        Good(nope=1)


@pytest.mark.parametrize(
    ("attrs", "message"),
    [
        ({"name": "GoodPass"}, "kebab-case"),
        ({"summary": ""}, "summary must be one line"),
        ({"summary": "two\nlines"}, "summary must be one line"),
        ({"options": (Option("max", "int", "4", "a bound"),)}, "default '4' is not of kind int"),
        ({"options": (Option("max", "int", 4, ""),)}, "needs help text"),
        ({"options": (Option("a", "int", 1, "x"), Option("a", "int", 1, "x"))}, "unique"),
        ({"knobs": (KnobSpec("lower", "1", "1", "x"),)}, "upper-case name"),
        ({"requires": ("good-pass",)}, "names the pass itself"),
        ({"after": ("Not_A_Pass",)}, "not a pass name"),
        ({"requires": ("tile",), "conflicts": ("tile",)}, "both require and conflict"),
    ],
)
def test_malformed_metadata_is_refused(attrs: dict[str, Any], message: str) -> None:
    with pytest.raises(PassDefinitionError, match=message):
        check_pass(variant(**attrs))


def test_methods_must_be_implemented() -> None:
    class Lazy(Pass[Site]):
        name = "lazy"
        summary = "forgot its methods"

    with pytest.raises(PassDefinitionError, match="must implement sites"):
        check_pass(Lazy)


def test_name_clash() -> None:
    reg = Registry()
    reg.register(Good)
    with pytest.raises(PassDefinitionError, match="is taken by"):
        reg.register(variant())
    reg.register(variant(), replace=True)


def test_entry_points_are_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    class EntryPoint:
        def load(self) -> object:
            return Good

    def fake_entry_points(group: str) -> list[EntryPoint]:
        assert group == "ktx.passes"
        return [EntryPoint()]

    monkeypatch.setattr(registry_module, "entry_points", fake_entry_points)
    monkeypatch.setattr(registry_module, "_DEFAULT", None)
    reg = registry_module.default_registry()
    assert "good-pass" in reg and "unroll" in reg


def test_plugins_register_from_a_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry_module, "_DEFAULT", None)
    load_plugin(str(ROOT / "examples" / "custom_pass.py"))
    assert "warps" in registry_module.default_registry()
    monkeypatch.delitem(sys.modules, "ktx_plugin_custom_pass", raising=False)
    with pytest.raises(KtxError, match="no such plugin file"):
        load_plugin("missing.py")
    with pytest.raises(KtxError, match="cannot import plugin"):
        load_plugin("no_such_module_for_ktx")
