"""Which of several ``__global__`` overloads of one name a spec means, as a cast nvcc resolves.

lmdeploy's ``activation.cu`` defines two kernels named ``ActivationKernel`` (a gate/up pair and
a fused gate_up with bias). ``&turbomind::ActivationKernel<false, 4, Silu<__half>, __half>``,
the address the nvcc stub takes to instantiate the kernel and find its symbol
(:func:`ktx.measure.compile.instantiation_stub`), is then ambiguous: nvcc stops with "cannot
determine which instance of overloaded function". The spec already says which one it means:
its ``[[args]]`` are the overload's parameters, by name and in order. The stub then takes the
address through a cast to that overload's function-pointer type, the parameter types as the
source writes them with the template arguments put in (``T*`` -> ``__half*``), which is how C++
itself picks an overload from an address.

Only for a name with several kernels: a kernel with one definition keeps the plain address.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

from ktx.ir.errors import KtxError
from ktx.ir.module import parse


def split_template_args(name_expression: str) -> tuple[str, tuple[str, ...]]:
    """``ns::k<a, b<c, d>>`` -> (``ns::k``, (``a``, ``b<c, d>``)): top-level commas only.

    >>> split_template_args("ns::k<false, 4, Silu<__half>, __half>")
    ('ns::k', ('false', '4', 'Silu<__half>', '__half'))
    >>> split_template_args("k")
    ('k', ())
    """
    lt = name_expression.find("<")
    if lt < 0 or not name_expression.rstrip().endswith(">"):
        return name_expression.strip(), ()
    inner = name_expression[lt + 1 : name_expression.rstrip().rfind(">")]
    args, depth, cur = [], 0, ""
    for ch in inner:
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}":
            depth -= 1
        if ch == "," and depth == 0:
            args.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        args.append(cur.strip())
    return name_expression[:lt].strip(), tuple(args)


@functools.lru_cache(maxsize=64)
def _kernels(source: str, name: str) -> tuple[tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]], ...]:
    """(parameter names, parameter types, template parameter names) of each kernel ``name``."""
    try:
        module = parse(source, "kernel.cu")
    except KtxError:
        return ()
    return tuple(
        (
            tuple(p.name for p in k.params),
            tuple(p.type for p in k.params),
            tuple(t.name for t in k.template_params),
        )
        for k in module.kernels
        if k.name == name
    )


def is_overloaded(source: str, kernel: str) -> bool:
    """``kernel`` (its last ``::`` part) names more than one ``__global__`` function of ``source``."""
    return len(_kernels(source, kernel.rpartition("::")[2])) > 1


def _substitute(type_text: str, bindings: dict[str, str]) -> str:
    text = re.sub(r"\b__restrict__\b|\b__restrict\b", " ", type_text)
    text = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: bindings.get(m.group(0), m.group(0)), text)
    return " ".join(text.split())


def overload_address(source: str, name_expression: str, param_names: Sequence[str]) -> str | None:
    """``static_cast<void (*)(T1, ...)>(&name_expression)`` for the overload whose parameters
    are ``param_names`` (an unnamed parameter matches any name), or None where the name has
    one kernel, or no overload or several match (nvcc then says what is ambiguous)."""
    qualified, targs = split_template_args(name_expression)
    found = _kernels(source, qualified.rpartition("::")[2])
    if len(found) < 2 or not param_names:
        return None
    fits = [
        (types, tparams)
        for names, types, tparams in found
        if len(names) == len(param_names)
        and all(not n or n == w for n, w in zip(names, param_names, strict=True))
    ]
    if len(fits) != 1:
        return None
    types, tparams = fits[0]
    bindings = dict(zip(tparams, targs, strict=False))
    signature = ", ".join(_substitute(t, bindings) for t in types)
    return f"static_cast<void (*)({signature})>(&{name_expression})"


def overload_params(source: str, kernel: str, arg_names: Sequence[str]) -> tuple[str, ...]:
    """What a :class:`~ktx.measure.compile.CompileRequest` carries as ``param_names``: the
    spec's argument names where ``kernel`` is overloaded in ``source``, else nothing (so the
    request, and its cache key, are those of a kernel with one definition)."""
    return tuple(arg_names) if is_overloaded(source, kernel) else ()
