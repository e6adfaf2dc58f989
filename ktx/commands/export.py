"""``ktx export RUN_DIR --torch [-o DIR]``: the tuned kernel as a PyTorch extension.

Writes ``kernels.cu`` (the dispatched variants and the original, no torch include),
``<kernel>_torch.py`` (built with ``torch.utils.cpp_extension.load_inline`` on first use; checks
dtype, device, contiguity and shape; dispatches; the original as the fallback) and a README
into ``-o DIR`` (default ``RUN_DIR/torch``). See :mod:`ktx.torch_export`.
"""

from __future__ import annotations

import argparse

from ktx.ir.errors import KtxError

from ktx.commands._checks import output_folder


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("export", help="export a run's dispatched kernel (--torch: a PyTorch extension)")
    p.add_argument("run_dir", metavar="RUN_DIR", help="the --out folder of ktx optimize or ktx tune")
    p.add_argument("--torch", action="store_true", help="write a PyTorch extension (the only format yet)")
    p.add_argument("-o", "--out", metavar="DIR", help="where to write (default RUN_DIR/torch)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not args.torch:
        raise KtxError("say which format", None, "ktx export RUN_DIR --torch")
    from ktx.torch_export import export_torch

    if args.out is not None:
        output_folder(args.out, "-o")
    result = export_torch(args.run_dir, args.out)
    for path in result.files:
        print(f"wrote {path}")
    return 0
