"""Kept for scripts that import it and set its attributes: this name is an alias of `xlrepro.engine.fused_bert`
(the same module object), so a script that patches a name here patches the engine's."""
import sys

from ..engine import fused_bert as _engine_module

sys.modules[__name__] = _engine_module
