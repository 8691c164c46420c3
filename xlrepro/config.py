"""Declarative configuration: typed dataclasses read from YAML, one loader for every paper.

Each paper declares its YAML schema as dataclasses whose fields carry ``metadata={"help": ...}`` (as HF's
``run_mlm.py`` arguments do); `from_dict` builds them and rejects unknown keys at every level, naming the valid
ones. Every check here fails with a ConfigError that names the valid choices.
"""
from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Iterable, Mapping, Sequence

import yaml

PROFILES = ("lab", "paper")


class ConfigError(ValueError):
    """A bad parameter: the message says which values are valid."""


def choose(kind: str, value: Any, valid: Iterable[Any]) -> Any:
    """Return `value` if it is one of `valid`, else raise a ConfigError listing them."""
    valid = list(valid)
    if value not in valid:
        raise ConfigError(f"unknown {kind} {value!r}; valid choices: {', '.join(map(str, valid))}")
    return value


def plural(n: int, noun: str, many: str | None = None) -> str:
    """'1 model', '2 models', '0 models' (`many`: an irregular plural): the count of a message."""
    return f"{n} {noun if n == 1 else many or noun + 's'}"


def check_profile(profile: str) -> str:
    return choose("profile", profile, PROFILES)


def check_seeds(seeds: Any) -> list[int]:
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Sequence) or not seeds:
        raise ConfigError(f"seeds must be a non-empty list of integers, e.g. [0, 42]; got {seeds!r}")
    if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds):
        raise ConfigError(f"seeds must be non-negative integers; got {seeds!r}")
    return list(seeds)


def check_keys(where: str, data: Any, valid: Iterable[str]) -> Mapping:
    """`data` as a mapping whose keys are all in `valid`; else a ConfigError naming the valid keys."""
    valid = list(valid)
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: expected a mapping with keys from {', '.join(valid)}; got {data!r}")
    unknown = [k for k in data if k not in valid]
    if unknown:
        raise ConfigError(f"{where}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                          f"valid choices: {', '.join(valid)}")
    return data


def help_of(cls) -> dict[str, str]:
    """Field name -> help text of a config dataclass."""
    return {f.name: f.metadata.get("help", "") for f in dataclasses.fields(cls)}


def from_dict(cls, data: Any, where: str | None = None):
    """Build dataclass `cls` from a mapping: nested dataclasses, dict[str, X] and tuple[X, ...] fields are built
    recursively; a dict field whose metadata has ``"keys"`` (a dataclass or a list of names) has its keys checked.
    Unknown or missing keys raise ConfigError naming the valid ones."""
    where = where or cls.__name__
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    check_keys(where, data, fields)
    missing = [n for n, f in fields.items() if n not in data
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:
        raise ConfigError(f"{where}: missing key{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
    hints = typing.get_type_hints(cls)
    return cls(**{k: _convert(hints[k], v, f"{where}.{k}", fields[k].metadata) for k, v in data.items()})


def _convert(tp, value, where: str, metadata: Mapping = {}):
    if dataclasses.is_dataclass(tp):
        return from_dict(tp, value, where)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Union and type(None) in args:
        return None if value is None else _convert(next(a for a in args if a is not type(None)), value, where,
                                                   metadata)
    keys = metadata.get("keys")
    if keys is not None:
        check_keys(where, value, [f.name for f in dataclasses.fields(keys)] if dataclasses.is_dataclass(keys) else keys)
    if origin is dict or tp is dict:
        check_keys(where, value, value.keys() if isinstance(value, Mapping) else ())  # a mapping at all
        key_type, value_type = args or (Any, Any)
        return {(str(k) if key_type is str else k): _convert(value_type, v, f"{where}.{k}") for k, v in value.items()}
    if origin is tuple and isinstance(value, (list, tuple)):
        return tuple(_convert(args[0], v, f"{where}[{i}]") for i, v in enumerate(value)) if args else tuple(value)
    return value


def load_yaml(package: str, cls, name: str = "experiments.yaml"):
    """`name` from a package's data (e.g. ``xlrepro.papers.<paper>``), built into `cls` with `from_dict`."""
    raw = yaml.safe_load(resources.files(package).joinpath(name).read_text())
    return from_dict(cls, raw, f"{package.rsplit('.', 1)[-1]}/{name}")


@dataclass(frozen=True)
class ModelSize:
    name: str = field(metadata={"help": "the size's name (its key in the YAML's `sizes`)"})
    hidden: int = field(metadata={"help": "hidden width"})
    layers: int = field(metadata={"help": "transformer layers"})
    heads: int = field(metadata={"help": "attention heads"})
    ffn: int = field(metadata={"help": "feed-forward width"})
    lr: float = field(metadata={"help": "peak learning rate"})
