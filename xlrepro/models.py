"""Kept for notebooks and scripts that import it: the model builders live in `xlrepro.engine.models`."""
from .engine.models import POSITION_SLOTS, bert_config, count_parameters, device_name, init_model

__all__ = ["POSITION_SLOTS", "bert_config", "count_parameters", "device_name", "init_model"]
