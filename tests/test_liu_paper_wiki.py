"""Liu et al.'s data-size design on Wikipedia (`xlrepro.papers.liu2020.paper_wiki`), on CPU against the fixtures of
tests/fixtures/paper/: the wikiextractor folders (en: three documents of 3, 1 and 2 paragraphs holding 7 sentences;
de: two documents, 4 sentences) and the MUSE en-de file. Sizes are tiny (vectors of 8, a BERT of hidden 16 and 2
layers for 3 steps): the tests check the samples, the files, the cache and the errors, not what the models learn."""
from __future__ import annotations

import json
from collections import Counter

import pandas as pd
import pytest

from xlrepro.config import ConfigError, ModelSize
from xlrepro.papers.liu2020.bert import BertRunConfig
from xlrepro.papers.liu2020.paper_wiki import (bert_rows, cased_dictionary, data_size_retrieval, resolve_wiki_paths,
                                               retrieval_pairs, wiki_corpora)
from xlrepro.papers.liu2020.static import StaticConfig

# seed 6 puts the English "House cat" document first and the German "Katze" document first (both read whole with
# pool 2), so the small samples hold the dictionary's words
SAMPLE = dict(sizes={"small": 3, "big": 4}, seed=6, pool=2)
TINY = dict(dictionary="full", min_count=1, static=StaticConfig(dim=8, min_count=1, workers=1, epochs=2),
            bert=BertRunConfig(model=ModelSize("tiny", 16, 2, 2, 32, 1e-3), steps=3, tokens_per_step=512), **SAMPLE)


@pytest.fixture
def paths(paper_env_of):
    paper_env_of("XLREPRO_WIKI_DIR", "XLREPRO_MUSE_DIR")
    return resolve_wiki_paths(languages=["de"], dictionary="full")  # the fixture is en-de.txt


def test_the_small_sample_is_nested_in_the_big_one_and_sizes_are_exact(paths):
    corpora = wiki_corpora(paths, **SAMPLE)
    assert corpora.languages == ("en", "de")
    small, big = corpora.documents["small"]["en"], corpora.documents["big"]["en"]
    # small: the three sentences of "House cat"; big: those and "Autism is a neurodevelopmental disorder."
    assert [s[:3] for s in small[0]] == [["The", "cat", "is"], ["The", "cat", "sleep"], ["The", "house", "is"]]
    assert small[0][0] == ["The", "cat", "is", "a", "domestic", "animal", "."]
    assert len(big) == 2 and big[0] == small[0] and big[1][0][:2] == ["Au", "##tism"]
    for lang in ("en", "de"):
        assert sum(map(len, corpora.documents["small"][lang])) == 3
        assert sum(map(len, corpora.documents["big"][lang])) == 4
    assert corpora.documents["small"]["de"][0][1][:3] == ["Die", "Katz", "##e"]  # "Die Katze schläft im Haus."
    # in tokens: exact counts (the last sentence cut), small a prefix of big
    tokens = wiki_corpora(paths, {"small": 10, "big": 20}, unit="tokens", seed=6, pool=4)  # pool 4: all read
    for lang in ("en", "de"):
        s, b = (tokens.streams(size)[lang] for size in ("small", "big"))
        assert sum(map(len, s)) == 10 and sum(map(len, b)) == 20
        flat_s, flat_b = [t for d in s for t in d], [t for d in b for t in d]
        assert flat_b[:10] == flat_s
    assert tokens.streams("small")["en"][0] == ["The", "cat", "is", "a", "domestic", "animal", ".", "The", "cat",
                                                "sleep"]
    # another seed, another order; the same seed, the same sample
    assert wiki_corpora(paths, **{**SAMPLE, "seed": 0}).fingerprints != corpora.fingerprints
    assert wiki_corpora(paths, **SAMPLE).fingerprints == corpora.fingerprints
    with pytest.raises(ConfigError, match="wiki/en holds 7 sentences, fewer than the big sample's 8"):
        wiki_corpora(paths, {"small": 1, "big": 8})


def test_rows_follow_the_lab_windows_and_the_dictionary_keeps_the_corpus_casing(paths):
    corpora = wiki_corpora(paths, **SAMPLE)
    # English small: 7 + 8 + 11 = 26 pieces in one document; window 512 packs them into one row of 28 with [CLS],
    # [SEP]; window 20 cuts 18 + 8
    ids, lengths, starts = bert_rows(corpora, "small", 512)
    assert starts.tolist() == [0, 1, 2] and lengths[0] == 28 and ids[0, 0] == 101 and ids[0, 27] == 102
    ids, lengths, starts = bert_rows(corpora, "small", 20)
    assert lengths[:2].tolist() == [20, 10] and ids.shape[1] == 20
    # MUSE is lower-cased: each word takes its most frequent form in the small sample, ties to the sorted first
    counts_en, counts_de = Counter({"The": 3, "the": 2, "house": 1}), Counter({"Die": 2, "die": 2, "Haus": 2})
    gold = {"the": {"die", "das"}, "house": {"haus"}, "cat": {"katze"}}
    assert cased_dictionary(gold, counts_en, counts_de) == {"The": {"Die"}, "house": {"Haus"}}
    # in the fixture: "das"/"die" (Das, Die), "haus" (Haus); Katze is two pieces and water is in no small sample
    assert retrieval_pairs(paths, corpora, dictionary="full", min_count=1) == {
        "de": [("The", "Das"), ("The", "Die"), ("house", "Haus")]}


def test_data_size_retrieval_writes_long_rows_and_reuses_trained_models(paths, tmp_path, monkeypatch):
    out = data_size_retrieval(paths, windows=(512, 20), **TINY)
    assert out == tmp_path / "runs" / "liu2020" / "paper" / "data_size_retrieval.csv"
    frame = pd.read_csv(out)
    assert frame.columns.tolist() == ["experiment", "seed", "language", "layer", "metric", "value"]
    models = {f"{m}-{s}" for m in ("word2vec", "glove", "bert") for s in ("small", "big")}
    experiments = {e.replace("-w512", "").replace("-w20", "") for e in frame["experiment"]}
    assert experiments == models | {"corpus-small", "corpus-big"}
    assert {"bert-small-w512", "bert-small-w20", "bert-big-w20"} <= set(frame["experiment"])
    corpus = frame[frame["experiment"].str.startswith("corpus")].pivot_table(
        index=["experiment", "language"], columns="metric", values="value")
    assert corpus["sentences"].to_dict() == {("corpus-big", "de"): 4, ("corpus-big", "en"): 4,
                                             ("corpus-small", "de"): 3, ("corpus-small", "en"): 3}
    mrr = frame[frame["metric"] == "mrr"]
    assert mrr["value"].between(1 / 3, 1).all()  # 3 candidates: Das, Die, Haus
    assert (frame.loc[frame["metric"] == "words", "value"] == 2).all()  # The, house
    assert set(frame.loc[frame["experiment"].str.startswith("bert"), "layer"]) == {0, 1, 2}
    assert set(frame.loc[frame["experiment"].str.startswith(("word2vec", "glove")), "layer"]) == {-1}
    assert (frame["seed"] == -1).all() and set(frame["language"]) == {"en", "de"}
    side = json.loads(out.with_suffix(".json").read_text())
    assert side["sample"] == {"sizes": {"small": 3, "big": 4}, "unit": "sentences", "seed": 6, "pool": 2}
    assert side["pairs"] == {"de": 3}

    # a second call trains nothing: every model comes from its run key's folder
    def trained(*args, **kwargs):
        raise AssertionError("trained again")
    monkeypatch.setattr("xlrepro.papers.liu2020.static.train_word2vec", trained)
    monkeypatch.setattr("xlrepro.papers.liu2020.static.train_glove", trained)
    monkeypatch.setattr("xlrepro.engine.pretrain.train_sampled_mlm", trained)
    again = data_size_retrieval(paths, windows=(512, 20), results=tmp_path / "again", **TINY)
    pd.testing.assert_frame_equal(pd.read_csv(again), frame)
    # another sample is another key: its models are trained
    with pytest.raises(AssertionError, match="trained again"):
        data_size_retrieval(paths, windows=(512,), **{**TINY, "sizes": {"small": 3, "big": 3}})


def test_every_argument_is_checked_before_any_text_is_read(paths, tmp_path, monkeypatch):
    def unread(*args, **kwargs):
        raise AssertionError("text read")
    monkeypatch.setattr("xlrepro.resources.read_wikiextractor", unread)
    bad = [({"sizes": {"small": 2}}, "exactly small and big; got \\['small'\\]; valid choices: small, big"),
           ({"sizes": {"small": 5, "big": 4}}, "small 5 > big 4"),
           ({"sizes": {"small": 0, "big": 4}}, "sizes\\['small'\\] must be a positive integer"),
           ({"unit": "words"}, "unknown unit 'words'; valid choices: sentences, tokens"),
           ({"pool": 0.5}, "pool must be a number >= 1"),
           ({"languages": ["sw"]}, "valid choices: en, de"),
           ({"models": ["elmo"]}, "unknown model 'elmo'; valid choices: word2vec, glove, bert"),
           ({"windows": [128]}, "unknown window 128; valid choices: 512, 20"),
           ({"dictionary": "train"}, "unknown MUSE dictionary 'train'; valid choices: test, full"),
           ({"dictionary": "test"}, "en-de.5000-6500.txt .*XLREPRO_MUSE_DIR .*--only liu2020/paper_wiki"),
           ({"static": {"dim": 8}}, "static must be a StaticConfig"),
           ({"min_count": 0}, "min_count must be a positive integer"),
           ({"static": StaticConfig(min_count=5)}, "static.min_count \\(5\\) must not exceed min_count \\(1\\)")]
    base = {"dictionary": "full", "min_count": 1, "static": StaticConfig(dim=8, min_count=1)}
    for change, message in bad:
        with pytest.raises(ConfigError, match=message):
            data_size_retrieval(paths, **{**base, **change})
    # a missing resource: one line naming its variable and the prepare command
    monkeypatch.delenv("XLREPRO_MUSE_DIR")
    monkeypatch.setenv("XLREPRO_CACHE", str(tmp_path / "cache"))
    with pytest.raises(ConfigError, match="XLREPRO_MUSE_DIR unset.*--only liu2020/paper_wiki.data_size_retrieval"
                       ) as err:
        resolve_wiki_paths(languages=["de"], dictionary="full")
    assert "\n" not in str(err.value)
    monkeypatch.setenv("XLREPRO_WIKI_DIR", str(paths.wiki / "de"))
    with pytest.raises(ConfigError, match="no en/ in .*XLREPRO_WIKI_DIR.*--only liu2020/paper_wiki") as err:
        resolve_wiki_paths(dictionary=None)
    assert "\n" not in str(err.value)
