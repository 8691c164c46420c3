"""Kept for scripts that import it: the model stack lives in `xlrepro.engine.stacked`."""
from ..engine.stacked import ModelStack, OptimConfig, linear_schedule, masked_capacity, select_masked

__all__ = ["ModelStack", "OptimConfig", "linear_schedule", "masked_capacity", "select_masked"]
