"""Built-in passes, one module each; :data:`BUILTINS` is what the default registry loads."""

from __future__ import annotations

from typing import Any

from ktx.passes.block_size import BlockSize
from ktx.passes.expose import Expose
from ktx.passes.launch_bounds import LaunchBounds
from ktx.passes.unroll import Unroll

from ktx.passbase import Pass

BUILTINS: tuple[type[Pass[Any]], ...] = (Expose, BlockSize, LaunchBounds, Unroll)

__all__ = ["BUILTINS", "BlockSize", "Expose", "LaunchBounds", "Unroll"]
