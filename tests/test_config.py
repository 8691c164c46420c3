"""One config loader for every paper: typed dataclasses, unknown keys rejected at every level with the valid ones."""
import copy
from dataclasses import dataclass, field
from importlib import resources

import pytest
import yaml

from xlrepro.config import ConfigError, ModelSize, from_dict, help_of
from xlrepro.papers.dufter2020.config import ChapterFile, TrainingConfig, build_chapter, load_chapter
from xlrepro.papers.wu2019.transfer import load_plan


@dataclass
class Inner:
    a: int = field(default=1, metadata={"help": "an a"})


@dataclass
class Outer:
    inner: Inner = field(metadata={"help": "nested"})
    named: dict[str, Inner] = field(default_factory=dict, metadata={"help": "a dict of them"})
    free: dict = field(default_factory=dict, metadata={"help": "checked keys", "keys": ["x", "y"]})
    pair: tuple[int, ...] = (0, 0)


def test_from_dict_builds_nested_dataclasses():
    out = from_dict(Outer, {"inner": {"a": 2}, "named": {"k": {}}, "free": {"x": 1}, "pair": [3, 4]})
    assert out == Outer(Inner(2), {"k": Inner(1)}, {"x": 1}, (3, 4))
    assert help_of(Inner) == {"a": "an a"}


@pytest.mark.parametrize("raw, message", [
    ({"inner": {}, "extra": 1}, "Outer: unknown key 'extra'; valid choices: inner, named, free, pair"),
    ({"inner": {"b": 1}}, "Outer.inner: unknown key 'b'; valid choices: a"),
    ({"inner": {}, "named": {"k": {"c": 1}}}, "Outer.named.k: unknown key 'c'; valid choices: a"),
    ({"inner": {}, "free": {"z": 1}}, "Outer.free: unknown key 'z'; valid choices: x, y"),
    ({}, "Outer: missing key inner"),
    ({"inner": 3}, "Outer.inner: expected a mapping"),
])
def test_from_dict_rejects_unknown_and_missing_keys(raw, message):
    with pytest.raises(ConfigError) as err:
        from_dict(Outer, raw)
    assert message in str(err.value)


def _dufter_raw():
    return yaml.safe_load(resources.files("xlrepro.papers.dufter2020").joinpath("experiments.yaml").read_text())


def test_dufter_yaml_loads_into_one_definition_per_experiment():
    ch = load_chapter()
    assert ch == build_chapter(from_dict(ChapterFile, _dufter_raw()), "dufter2020/experiments.yaml")
    assert ch.sizes["small"] == ModelSize("small", 64, 12, 1, 256, 2e-3)
    e = ch.experiment("21b")
    assert (e.lang_pos, e.no_parallel, e.epochs, e.size) == (True, True, 200, "small")
    assert ch.training.eval_layers == (0, 8) and ch.training.curve_points == 10
    assert "vocab_per_language" not in help_of(TrainingConfig)  # the dead field is gone


@pytest.mark.parametrize("edit, message", [
    (lambda r: r.update(seed=[0]), "unknown key 'seed'; valid choices: chapter, seeds, sizes, experiments"),
    (lambda r: r["sizes"]["small"].update(hiden=3), "sizes.small: unknown key 'hiden'; valid choices: hidden"),
    (lambda r: r["training"].update(vocab_per_language=2048), "training: unknown key 'vocab_per_language'"),
    (lambda r: r["experiments"]["1"].update(langpos=True), "experiments.1: unknown key 'langpos'; valid choices: id"),
    (lambda r: r["defaults"].update(epoch=3), "defaults: unknown key 'epoch'; valid choices: id, description"),
    (lambda r: r["experiments"]["15"].update(size="huge"), "unknown size of model 15 'huge'; valid choices: small"),
    (lambda r: r["tables"]["table1"].append("99"), "unknown model ID in table table1 '99'"),
])
def test_dufter_yaml_errors_name_the_valid_keys(edit, message):
    raw = _dufter_raw()
    edit(raw)
    with pytest.raises(ConfigError) as err:
        build_chapter(from_dict(ChapterFile, raw, "dufter2020/experiments.yaml"))
    assert message in str(err.value)


def _wu_raw():
    return yaml.safe_load(resources.files("xlrepro.papers.wu2019").joinpath("experiments.yaml").read_text())


@pytest.mark.parametrize("edit, message", [
    (lambda r: r.update(lr=[1e-4]), "unknown key 'lr'; valid choices: train_language, seeds, lr_grid"),
    (lambda r: r["recipe"].update(epoch=3), "recipe: unknown key 'epoch'; valid choices: batch_size, epochs"),
    (lambda r: r["probe"].update(train=5), "probe: unknown key 'train'; valid choices: train_per_language"),
    (lambda r: r["models"]["smoke"].update(layers=2), "models.smoke: unknown key 'layers'; valid choices: languages"),
    (lambda r: r["models"]["smoke"]["size"].update(width=2), "models.smoke.size: unknown key 'width'"),
])
def test_wu_plan_errors_name_the_valid_keys(edit, message):
    raw = _wu_raw()
    assert load_plan(copy.deepcopy(raw)) == load_plan()
    edit(raw)
    with pytest.raises(ConfigError) as err:
        load_plan(raw)
    assert message in str(err.value)
