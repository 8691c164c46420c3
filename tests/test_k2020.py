"""K et al. 2020: known answers for the data layer, the plan and the cell pipeline (smoke size)."""
import argparse

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from xlrepro.config import ConfigError, from_dict
from xlrepro.papers.k2020 import data as D
from xlrepro.papers.k2020.config import (Experiment, check_shape, load_plan, model_size, parameter_count,
                                         experiments_of)
from xlrepro.reference import paper_numbers


# ------------------------------------------------------------------------------------------- Fake-English
def test_unicode_shift_by_hand_and_inverse():
    assert D.shift_text("ab c") == chr(97 + 200000) + chr(98 + 200000) + " " + chr(99 + 200000)
    text = "In the beginning, God created."
    fake = D.to_fake_unicode(text)
    assert fake.count(" ") == 6  # "In the beginning , God created ." : punctuation split off, spaces kept
    assert D.from_fake_unicode(fake) == "In the beginning , God created ."
    assert not set(fake.replace(" ", "")) & set(text)


def test_shift_past_unicode_is_an_error():
    with pytest.raises(ValueError, match="leaves Unicode"):
        D.shift_text(chr(0x10FFFF - 5))


def test_enfake_shares_no_piece_with_a_joint_vocabulary():
    en = ["the king went to the house of the lord", "and the king said to them"]
    es = ["el rey fue a la casa", "y el rey les dijo"]
    specials = D.special_tokens(["enfake", "es"], langid=False)
    tok = D.build_tokenizer("wordpiece", [D.to_fake_unicode(t) for t in en] + es, 40, specials)
    fake = [e.tokens for e in tok.encode_batch([D.to_fake_unicode(t) for t in en], add_special_tokens=False)]
    real = [e.tokens for e in tok.encode_batch(es, add_special_tokens=False)]
    assert D.piece_overlap(fake, real, specials)["shared_types"] == 0
    # unshifted, the same small vocabulary shares pieces with Spanish (e.g. the word 'a' and the initial 'a' of 'and')
    tok2 = D.build_tokenizer("wordpiece", en + es, 40, specials)
    en_p = [e.tokens for e in tok2.encode_batch(en, add_special_tokens=False)]
    es_p = [e.tokens for e in tok2.encode_batch(es, add_special_tokens=False)]
    assert D.piece_overlap(en_p, es_p, specials)["shared_types"] > 0


# ------------------------------------------------------------------------------------------- permutation
def test_permutation_counts_and_identity():
    assert [D.n_transpositions(L, p) for L, p in [(1, 1.0), (2, 1.0), (9, 0.25), (9, 0.5), (10, 1.0), (10, 0.0)]] == \
        [0, 1, 2, 4, 9, 0]
    line = list(range(10))
    assert D.permute(line, 0.0, np.random.default_rng(0)) == line
    out = D.permute(line, 1.0, np.random.default_rng(0))
    assert sorted(out) == line  # a permutation of the same pieces
    # one transposition moves exactly two pieces
    one = D.permute(list(range(3)), 0.5, np.random.default_rng(1))
    assert sum(a != b for a, b in zip(one, range(3))) == 2
    # seeded: the same draw again
    assert D.permute(line, 0.5, np.random.default_rng(7)) == D.permute(line, 0.5, np.random.default_rng(7))
    with pytest.raises(ConfigError, match="in \\[0, 1\\]"):
        D.permute(line, 1.5, np.random.default_rng(0))


# ------------------------------------------------------------------------------------------- unigram corpus
def test_unigram_corpus_keeps_lengths_and_matches_counts():
    lines = ["a a a a b", "a b c", "a", "b b a a a a"] * 200  # counted by hand: a 10, b 4, c 1 of 15 per block
    out = D.unigram_corpus(lines, seed=3)
    assert [len(l.split()) for l in out] == [len(l.split()) for l in lines]
    counts = pd.Series(" ".join(out).split()).value_counts()
    expected = {"a": 10 / 15, "b": 4 / 15, "c": 1 / 15}
    n = counts.sum()
    chi = stats.chisquare([counts.get(w, 0) for w in "abc"], [expected[w] * n for w in "abc"])
    assert chi.pvalue > 0.001
    assert D.unigram_corpus(lines, seed=3) == out and D.unigram_corpus(lines, seed=4) != out


# ------------------------------------------------------------------------------------------- NSP pairs
def test_nsp_pairs_half_random_and_within_documents():
    docs = np.repeat(np.arange(200), 11)  # 200 chapters of 11 verses: 2,000 consecutive pairs
    pairs = D.nsp_pairs(docs, seed=0)
    assert len(pairs) == 2000
    share = np.mean([not p.is_next for p in pairs])
    assert abs(share - 0.5) < 4 * np.sqrt(0.25 / 2000)
    for p in pairs:
        if p.is_next:
            assert p.second == p.first + 1 and docs[p.first] == docs[p.second]
        else:
            assert docs[p.second] != docs[p.first]
    assert all(p.is_next for p in D.nsp_pairs(docs, seed=0, random_share=0.0))


# ------------------------------------------------------------------------------------------- inputs
def test_langid_separators_where_declared():
    ids, types, starts = D.pair_input(np.array([10, 11]), np.array([20]), cls=2, sep_a=7, sep_b=8, max_length=16)
    assert ids.tolist() == [2, 10, 11, 7, 20, 8] and types.tolist() == [0, 0, 0, 0, 1, 1]
    assert starts.tolist() == [0, 1, 2, 3, 4, 5]
    ids, _, _ = D.pair_input(np.arange(10), np.arange(3), 2, 3, 3, max_length=8)  # longest first: a is cut
    assert ids.tolist() == [2, 0, 1, 3, 0, 1, 2, 3]
    specials = D.special_tokens(["enfake", "es"], langid=True)
    assert specials[-2:] == ["[SEP-enfake]", "[SEP-es]"]


def test_whole_word_mask_selects_words():
    import torch
    from xlrepro.papers.k2020.bbert import whole_word_mask
    ids = torch.tensor([[2, 10, 11, 12, 13, 3]])
    start = torch.tensor([[0, 1, 1, 1, 4, 5]])  # pieces 1-3 are one word
    maskable = torch.tensor([[False, True, True, True, True, False]])
    u = torch.tensor([[0.9, 0.01, 0.99, 0.99, 0.5, 0.0]])  # only the word starting at 1 is selected
    act = torch.tensor([[0.0, 0.1, 0.85, 0.95, 0.0, 0.0]])  # mask, keep, random
    inputs, labels = whole_word_mask(ids, maskable, start, u, act, torch.full_like(ids, 99), mask_id=4, p=0.15)
    assert labels.tolist() == [[-100, 10, 11, 12, -100, -100]]
    assert inputs.tolist() == [[2, 4, 11, 99, 13, 3]]


def test_three_tokenizations_and_unk_rate():
    texts = ["the king came", "the king went home"]
    specials = D.special_tokens(["en"], False)
    char = D.build_tokenizer("char", texts, 0, specials)
    assert char.encode("king", add_special_tokens=False).tokens == ["k", "##i", "##n", "##g"]
    word = D.build_tokenizer("word", texts, 2, specials)  # the 2 most frequent words: the, king
    assert word.encode("the king went", add_special_tokens=False).tokens == ["the", "king", "[UNK]"]
    assert D.unk_rate(word, ["the king went home"]) == 0.5
    with pytest.raises(ConfigError, match="valid choices: wordpiece, char, word"):
        D.build_tokenizer("bytes", texts, 10, specials)


# ------------------------------------------------------------------------------------------- corpora
def test_halves_are_disjoint_and_seeded(multilingual_cache):
    a = D.corpus("en", 0, max_lines=None)
    b = D.corpus("es", 1, max_lines=None)
    ka, kb = set(zip(a.book, a.chapter)), set(zip(b.book, b.chapter))
    assert ka and kb and not ka & kb
    assert D.chapter_half(1, 1) == D.chapter_half(1, 1) and {D.chapter_half(1, c) for c in range(1, 40)} == {0, 1}


def test_language_without_bible_names_the_valid_ones():
    with pytest.raises(ConfigError, match="valid choices: en, fr, es"):
        D.check_corpus_language("el")


# ------------------------------------------------------------------------------------------- plan
def test_plan_loads_and_parts_are_declared():
    plan = load_plan()
    assert len(plan.seeds) >= 3
    assert experiments_of(plan, "pilot") == ["en-es", "enfake-es", "en-ru", "enfake-ru"]
    with pytest.raises(ConfigError, match="valid choices: pilot, base, t1"):
        experiments_of(plan, "t99")


def test_parts_joined_by_commas_run_as_one_plan():
    plan = load_plan()
    # t9 and t10 share their first three experiments (the base cells): listed once, in order
    assert experiments_of(plan, "pilot,t9") == ["en-es", "enfake-es", "en-ru", "enfake-ru", "enfake-hi",
                                                "enfake-es/langid", "enfake-hi/langid", "enfake-ru/langid"]
    with pytest.raises(ConfigError, match="unknown part 't99'; valid choices: pilot"):
        experiments_of(plan, "t1,t99")
    with pytest.raises(ConfigError, match="'all' cannot be combined"):
        experiments_of(plan, "all,t1")


def test_unknown_variant_key_is_an_error():
    with pytest.raises(ConfigError, match="unknown key 'shuffle'; valid choices: pretrain, finetune"):
        from_dict(Experiment, {"pretrain": ["en", "es"], "finetune": "en", "test": ["es"], "shuffle": 0.5})
    with pytest.raises(ConfigError, match="valid choices: wordpiece, char, word"):
        Experiment(pretrain=("en", "es"), finetune="en", test=("es",), tokenization="bpe")
    with pytest.raises(ConfigError, match="unknown test language 'hi'; valid choices: en, es"):
        Experiment(pretrain=("en", "es"), finetune="en", test=("hi",))


def test_nsp_and_its_control_exclude_each_other():
    Experiment(pretrain=("enfake", "es"), finetune="enfake", test=("es",), single=True)
    with pytest.raises(ConfigError, match="single is for the no-NSP control"):
        Experiment(pretrain=("enfake", "es"), finetune="enfake", test=("es",), nsp=True, single=True)


def test_heads_must_divide_hidden():
    with pytest.raises(ConfigError, match="5 heads do not divide hidden 192; valid head counts: 1, 2, 3, 4, 6, 8"):
        check_shape(192, 12, 5)
    plan = load_plan()
    bad = Experiment(pretrain=("enfake", "ru"), finetune="enfake", test=("ru",), heads=5, hidden=192)
    with pytest.raises(ConfigError, match="do not divide"):
        model_size(plan.profiles["lab"], bad)


def test_parameter_count_matches_hf_and_depth_sweep_is_flat():
    from transformers import BertConfig, BertForMaskedLM
    model = BertForMaskedLM(BertConfig(vocab_size=500, hidden_size=36, num_hidden_layers=3, num_attention_heads=3,
                                       intermediate_size=144, max_position_embeddings=64))
    assert parameter_count(36, 3, 3, 500, 64) == sum(p.numel() for p in model.parameters())
    plan = load_plan()
    prof = plan.profiles["lab"]
    base = parameter_count(192, 12, 12, prof.pretrain.vocab_size, prof.pretrain.max_length)
    for name in experiments_of(plan, "t4"):
        s = model_size(prof, plan.experiments[name])
        assert s.hidden % s.heads == 0
        assert abs(parameter_count(s.hidden, s.layers, s.heads, prof.pretrain.vocab_size, 128) / base - 1) < 0.06, name


def test_reference_cells_by_hand():
    t1 = paper_numbers("k2020", "Table 1")
    r = t1[(t1.experiment == "enfake-hi") & (t1.metric == "f1")].iloc[0]
    assert (r["mean"], r["std"]) == (62.9, 0.7)
    t6 = paper_numbers("k2020", "Table 6")
    assert t6[(t6.experiment == "enfake-ru/L12H12/213.2%") & (t6.metric == "parameters_m")]["mean"].item() == 283.11
    t11 = paper_numbers("k2020", "Table 11")
    assert t11[(t11.experiment == "enfake-hi") & (t11.language == "hi>enfake")]["mean"].item() == 55.6
    # every reference experiment is declared (so the tables join with our results)
    plan = load_plan()
    ref = paper_numbers("k2020")
    assert set(ref["experiment"]) <= set(plan.experiments)


# ------------------------------------------------------------------------------------------- CLI
def test_cli_validates_up_front():
    from xlrepro.papers import get_paper
    paper = get_paper("k2020")
    ns = lambda **kw: argparse.Namespace(**{"part": "pilot", "profile": "smoke", "seeds": None, "time_limit": None,  # noqa
                                            "allow_cpu": False, **kw})
    with pytest.raises(ConfigError, match="valid choices: pilot, base, t1"):
        paper.prepare_train(ns(part="t12"))
    with pytest.raises(ConfigError, match="valid choices: lab, alltext, alltext2x, alltext4x, alltext8x, smoke, paper"):
        paper.prepare_train(ns(profile="wiki"))
    with pytest.raises(ConfigError, match="CPU"):
        paper.prepare_train(ns(profile="lab"))
    with pytest.raises(ConfigError, match="leaves no room for an evaluation"):  # evaluations start with 240 s left
        paper.prepare_train(ns(profile="lab", time_limit=290))
    with pytest.raises(ConfigError, match="--last-call decides .* give --time-limit too"):
        paper.prepare_train(ns(last_call=True))
    with pytest.raises(ConfigError, match="--time-total must be .* at least --time-limit"):
        paper.prepare_train(ns(time_limit=600, time_total=500))
    with pytest.raises(ConfigError, match="--last-call is --time-total equal to --time-limit"):
        paper.prepare_train(ns(time_limit=600, time_total=900, last_call=True))
    with pytest.raises(ConfigError, match="--gpu H100 estimates a dry run"):
        paper.prepare_train(ns(gpu="H100"))
    with pytest.raises(ConfigError, match="valid choices: H100, H200"):
        paper.prepare_train(ns(gpu="A100", dry_run=True))
    with pytest.raises(ConfigError, match="--gpus plans a dry run .* without --dry-run"):
        paper.prepare_train(ns(gpus=4))
    with pytest.raises(ConfigError, match="--gpus plans a dry run .* got 0"):
        paper.prepare_train(ns(gpus=0, dry_run=True))
    # a dry run at the lab profile on this CPU is allowed (it trains nothing), and plans for the GPUs asked
    text = paper.prepare_train(ns(part="t3", profile="lab", gpus=2, dry_run=True, workers_per_gpu=2))()
    assert text.splitlines()[0].endswith("left over 4 slots")
    text = paper.prepare_train(ns(part="t3", profile="lab", gpus=2, dry_run=True, workers_per_gpu=2, gpu="H100"))()
    assert text.splitlines()[0].endswith("left over 4 slots (speeds measured on H100s only)")


def test_smoke_cell_runs_and_resumes(multilingual_cache, tmp_path):
    from xlrepro.papers.k2020.bbert import Cell
    cell = Cell(None, "smoke", "enfake-es", seeds=[0], root=tmp_path)
    assert cell.pretrain(progress=False, time_limit=1e-9) is False  # stopped at once: a checkpoint, no model
    assert list(tmp_path.glob("stacks/*/checkpoint.pt")) and not cell.pretrained()
    out = cell.run(progress=False)
    assert set(out["language"]) >= {"enfake", "es", "enfake>es", "es>enfake"}
    assert out[out.metric == "accuracy"]["value"].between(0, 1).all()
    again = Cell(None, "smoke", "enfake-es", seeds=[0], root=tmp_path)
    assert again.dir == cell.dir  # the same configuration finds its run
    pd.testing.assert_frame_equal(again.run(progress=False), out)


def test_ours_table_shows_seed_counts_and_baselines_by_hand():
    from xlrepro.papers.k2020.report import ours_table
    rows = [("en-es", 0, "es", 0.50), ("en-es", 1, "es", 0.52), ("en-es", 2, "es", 0.54),   # 3 seeds: 52.0 ± 2.0
            ("enfake-ru", 0, "ru", 0.178),                                                 # 1 seed: no spread
            ("en-ru", 0, "ru", 0.30), ("en-ru", 1, "ru", 0.34),                           # 2 of 3 seeds
            ("majority/en-es", -1, "es", 0.254)]
    results = pd.DataFrame([{"experiment": e, "seed": s, "language": l, "task": "sections", "metric": "accuracy",
                             "value": v} for e, s, l, v in rows])
    table = ours_table(results, ["en-es", "enfake-ru", "en-ru"])
    assert table.loc["en-es", "es"] == "52.0\u00a0±\u00a02.0" and table.loc["en-es", "ru"] == ""  # no-break spaces
    table = table.map(lambda text: text.replace("\u00a0", " "))
    assert table.loc["enfake-ru", "ru"] == "17.8 (1 seed)"
    assert table.loc["en-ru", "ru"] == "32.0 ± 2.8 (2 seeds)"
    assert table.loc["majority/en-es", "es"] == "25.4"
    same = pd.concat([results, results.iloc[[-1]].assign(experiment="majority/en-ru", language="ru")])
    table = ours_table(same, ["en-es", "enfake-ru", "en-ru"])  # both baselines 25.4: one row, at the end
    assert list(table.index) == ["en-es", "enfake-ru", "en-ru", "majority class"]
    assert table.loc["majority class"].tolist() == ["25.4", "25.4"]
    other = pd.concat([results, results.iloc[[-1]].assign(experiment="majority/en-ru", value=0.30)])
    assert "majority/en-ru" in ours_table(other, ["en-es", "en-ru"]).index  # 25.4 and 30.0 in es: kept apart


def test_a_cell_whose_every_seed_failed_keeps_its_row():
    from xlrepro.papers.k2020.report import ours_table, with_failed_rows
    every = pd.DataFrame([{"experiment": e, "seed": s, "language": l, "task": "sections", "metric": "accuracy",
                           "value": v} for e, s, l, v in [("a", 0, "ru", 0.5), ("a", 0, "enfake", 0.8),
                                                          ("b", 0, "ru", 0.25), ("b", 1, "ru", 0.25),
                                                          ("majority/a", -1, "ru", 0.25)]])
    shown = every[every["experiment"] != "b"]  # both of b's seeds failed and were taken out
    table = with_failed_rows(ours_table(shown, ["b", "a"]), ["b", "a", "c"], every, shown)
    assert list(table.index) == ["b", "a", "majority/a"]  # the paper's order; c was never trained: no row
    assert table.loc["b"].tolist() == ["all 2 seeds failed", ""]
    assert with_failed_rows(ours_table(every, ["a", "b"]), ["a", "b"], every, every).equals(ours_table(every, ["a", "b"]))


def test_ner_tables_give_the_papers_f1_then_ours_where_they_exist():
    """Table 8 reports NER (the paper's enfake-es/nsp F1 on es is 62.6), Table 11 does not; our F1 of two seeds
    (0.70, 0.74) reads 72.0 ± 2.8 (2 seeds); without our NER results only the paper's table is shown."""
    from xlrepro.papers.k2020.report import ner_tables
    results = pd.DataFrame([{"experiment": "enfake-es/nsp", "seed": s, "language": "enfake", "task": "ner",
                             "metric": "f1", "value": v} for s, v in ((0, 0.70), (1, 0.74))])
    shown = ner_tables("Table 8", results, ["enfake-es", "enfake-es/nsp"])
    assert [c.split("**")[1] for c, _ in shown] == ["Table 8, the paper, NER", "Table 8, ours, NER"]
    assert shown[0][1].data.loc["enfake-es/nsp", "es"] == 62.6
    assert shown[1][1].loc["enfake-es/nsp", "enfake"].replace("\u00a0", " ") == "72.0 ± 2.8 (2 seeds)"
    assert ner_tables("Table 11", results.iloc[:0], ["enfake-es"]) == []
    assert len(ner_tables("Table 8", results.iloc[:0], ["enfake-es"])) == 1


def test_word_order_reading_by_hand():
    """es: p = 0 at 40/42/44 (42.0 ± 2.0, 16.6 above the majority class 25.4, 2 SE = 2 x 2/sqrt 3 = 2.3), p = 1 at
    29/30/31: a fall of 12.0 beyond 2 SE (2 sqrt(4/3 + 1/3) = 2.6), the paper's 70.9 - 62.5 = 8.4. hi: 24/26 then
    24/25: 0.4 below the majority class, so no transfer to remove. ru has no p = 1 and is left out."""
    from xlrepro.papers.k2020.report import word_order_reading
    cells = {("enfake-es", "es"): [0.40, 0.42, 0.44], ("enfake-es/perm1", "es"): [0.29, 0.30, 0.31],
             ("enfake-hi", "hi"): [0.24, 0.26], ("enfake-hi/perm1", "hi"): [0.24, 0.25], ("enfake-ru", "ru"): [0.3]}
    rows = [{"experiment": e, "seed": k, "language": lang, "task": "sections", "metric": "accuracy", "value": v}
            for (e, lang), vs in cells.items() for k, v in enumerate(vs)]
    rows += [{"experiment": f"majority/{e}", "seed": -1, "language": lang, "task": "sections", "metric": "accuracy",
              "value": 0.254} for e, lang in cells]
    text = word_order_reading(pd.DataFrame(rows))
    lines = text.split("\n")
    assert lines[0].startswith("**Word order in the trained cells**") and len(lines) == 4
    assert lines[2] == ("- es: p = 0: 42.0 ± 2.0, p = 1: 30.0 ± 1.0. At p = 0 the model stands 16.6 points above the "
                        "majority class (25.4; 2 SE 2.3); from p = 0 to p = 1 accuracy falls 12.0 points, beyond 2 SE "
                        "(2.6); the paper's fall: 8.4.")
    assert lines[3].startswith("- hi: p = 0: 25.0 ± 1.4 (2 seeds), p = 1: 24.5 ± 0.7 (2 seeds). At p = 0 the model "
                               "stands 0.4 points below the majority class")
    assert "falls 0.5 points, within 2 SE (2.2)" in lines[3]
    assert lines[3].endswith("Without transfer at p = 0 there is none for the permutation to remove.")
    assert word_order_reading(pd.DataFrame(rows[:3])) == ""


def test_nsp_reading_by_hand():
    """es: no NSP 30/32/34 (32.0 ± 2.0), NSP 40/42/44: +10.0, 2 SE = 2 sqrt(2 x 4/3) = 3.3, the paper 70.9 - 72.7 =
    -1.8; on Fake-English 88/88/88 against 86/87/88: -1.0 within 2 SE (2 x 1/sqrt 3 = 1.2), the paper 78.5 - 78.7.
    hi has no NSP cell and is left out; ru's NSP cell has one seed, so no SE."""
    from xlrepro.papers.k2020.report import nsp_reading
    cells = {("enfake-es", "es"): [0.30, 0.32, 0.34], ("enfake-es/nsp", "es"): [0.40, 0.42, 0.44],
             ("enfake-es", "enfake"): [0.88, 0.88, 0.88], ("enfake-es/nsp", "enfake"): [0.86, 0.87, 0.88],
             ("enfake-hi", "hi"): [0.3, 0.3, 0.3], ("enfake-ru", "ru"): [0.20, 0.22], ("enfake-ru/nsp", "ru"): [0.3]}
    rows = pd.DataFrame([{"experiment": e, "seed": k, "language": lang, "task": "sections", "metric": "accuracy",
                          "value": v} for (e, lang), vs in cells.items() for k, v in enumerate(vs)])
    lines = nsp_reading(rows).split("\n")
    assert lines[0].startswith("**What NSP changes in the trained cells**") and len(lines) == 4
    assert lines[2] == ("- enfake-es: accuracy on es 32.0 ± 2.0 without NSP, 42.0 ± 2.0 with: +10.0 (beyond 2 SE, "
                        "3.3; the paper -1.8); on Fake-English 88.0 ± 0.0 without NSP, 87.0 ± 1.0 with: -1.0 (within "
                        "2 SE, 1.2; the paper -0.2).")
    assert lines[3] == ("- enfake-ru: accuracy on ru 21.0 ± 1.4 (2 seeds) without NSP, 30.0 (1 seed) with: +9.0 (no SE "
                        "from one seed; the paper -1.0).")
    assert nsp_reading(rows[rows["experiment"] != "enfake-es/nsp"].iloc[:6]) == ""
    # the control, es 36/37/38 (37.0 ± 1.0): NSP minus it 42 - 37 = +5.0, 2 SE = 2 sqrt(4/3 + 1/3) = 2.6; it minus
    # the base 37 - 32 = +5.0, the same 2 SE; the paper has no control
    control = pd.DataFrame([{"experiment": "enfake-es/single", "seed": k, "language": "es", "task": "sections",
                             "metric": "accuracy", "value": v} for k, v in enumerate([0.36, 0.37, 0.38])])
    line = nsp_reading(pd.concat([rows, control])).split("\n")[2]
    assert line == lines[2][:-1] + ("; the control (no NSP, trained as the NSP cells are) 37.0 ± 1.0 on es: NSP minus "
                                    "the control +5.0 (beyond 2 SE, 2.6), the control minus the base +5.0 (beyond 2 "
                                    "SE, 2.6).")
    told = nsp_reading(pd.concat([rows, control])).split("\n")[-1]
    assert told == ("By the control, the change in target accuracy goes with: on es, both (each part beyond 2 SE).")
    # a control at the base's level (31/32/33, 32.0 ± 1.0): NSP minus it +10.0 beyond 2 SE (2 sqrt(4/3 + 1/3) = 2.6),
    # it minus the base +0.0 within: the change goes with the objective
    level = control.assign(value=[0.31, 0.32, 0.33])
    assert nsp_reading(pd.concat([rows, level])).split("\n")[-1] == (
        "By the control, the change in target accuracy goes with: on es, the objective (NSP minus the control beyond "
        "2 SE, the control minus the base within).")
    # a control at the NSP cell's level (41/42/43): the trainer; one seed of it: not told apart
    assert "on es, the trainer (the control minus the base beyond 2 SE" in nsp_reading(
        pd.concat([rows, control.assign(value=[0.41, 0.42, 0.43])]))
    assert nsp_reading(pd.concat([rows, level.iloc[:1]])).endswith("on es, not told apart (a cell has one seed).")
    # without a control the reading ends with the last target's line
    assert nsp_reading(rows).split("\n")[-1].startswith("- enfake-ru")


def test_four_language_reading_by_hand():
    """Base es 50/52/54 (52.0 ± 2.0), hi 24/25/26 (25.0 ± 1.0: not above the majority class 25.4), ru 30/30/30;
    L16H3 es 40/42/44: -10.0, beyond 2 SE (2 sqrt(4/3 + 4/3) = 3.3); hi 24/25/26: +0.0; ru 31/31/31: +1.0,
    beyond 2 SE (0: no spread). The paper's changes: es 65.3 - 70.0 = -4.7, hi 51.1 - 50.7 = +0.4, ru 60.3 - 65.2 =
    -4.9. L36H1 has no ru and is left out."""
    from xlrepro.papers.k2020.report import four_language_reading
    cells = {("en-es-hi-ru", "es"): [0.50, 0.52, 0.54], ("en-es-hi-ru", "hi"): [0.24, 0.25, 0.26],
             ("en-es-hi-ru", "ru"): [0.30, 0.30, 0.30], ("en-es-hi-ru/L16H3", "es"): [0.40, 0.42, 0.44],
             ("en-es-hi-ru/L16H3", "hi"): [0.24, 0.25, 0.26], ("en-es-hi-ru/L16H3", "ru"): [0.31, 0.31, 0.31],
             ("en-es-hi-ru/L36H1", "es"): [0.4, 0.4, 0.4], ("en-es-hi-ru/L36H1", "hi"): [0.2, 0.2, 0.2]}
    rows = [{"experiment": e, "seed": k, "language": lang, "task": "sections", "metric": "accuracy", "value": v}
            for (e, lang), vs in cells.items() for k, v in enumerate(vs)]
    rows += [{"experiment": f"majority/{e}", "seed": -1, "language": lang, "task": "sections", "metric": "accuracy",
              "value": 0.254} for e, lang in cells]
    head, lines = four_language_reading(pd.DataFrame(rows)).split("\n\n")
    assert head.startswith("**Deep narrow models in the trained cells** (accuracy on the target, %). The four-language "
                           "base reaches es 52.0 ± 2.0, hi 25.0 ± 1.0, ru 30.0 ± 0.0 (the majority class: 25.4). On hi "
                           "the base is not above the majority class beyond 2 SE")
    assert head.endswith("2 of 3 changes lie beyond 2 SE of the difference, 1 of them below the base:")
    assert lines == "- en-es-hi-ru/L16H3: es -10.0 (-4.7), hi +0.0 (+0.4), ru +1.0 (-4.9)"
    assert four_language_reading(pd.DataFrame(rows[:9])) == ""  # no deep narrow cell with every target


def test_overlap_reading_compares_trained_pairs_with_the_paper_by_hand():
    from xlrepro.papers.k2020.report import overlap_reading
    rows = [("en-es", 0, 0.50), ("en-es", 1, 0.52), ("en-es", 2, 0.54), ("enfake-es", 0, 0.30),
            ("enfake-es", 1, 0.32), ("enfake-es", 2, 0.34), ("majority/en-es", -1, 0.254), ("en-ru", 0, 0.31)]
    results = pd.DataFrame([{"experiment": e, "seed": s, "language": e.split("-")[-1], "task": "sections",
                             "metric": "accuracy", "value": v} for e, s, v in rows])
    paper = pd.DataFrame({"es": [72.3, 70.9]}, index=["en-es", "enfake-es"])
    text = overlap_reading(results, paper)
    # es: 52.0 - 32.0 = 20.0 points against the paper's 72.3 - 70.9 = 1.4; hi and ru have no pair yet
    assert ("en-es 52.0 ± 2.0, enfake-es 32.0 ± 2.0, so removing the overlap costs 20.0 points (the paper: 1.4)"
            in text)
    assert "majority class is 25.4" in text and "claims wait for hi, ru" in text
    assert overlap_reading(results[results.experiment == "en-ru"], paper) == ""


def test_table_rows_put_our_variants_after_the_paper_row_they_vary():
    from xlrepro.papers.k2020.report import table_rows
    paper = ["en-es", "enfake-es", "en-ru", "enfake-ru"]
    names = ["enfake-ru/id", "en-es", "enfake-es/id", "enfake-es/perm1", "en-es/L12H12/22.3%", "enfake-es"]
    # perm1 serves Table 2, the 22.3% cell is at another size: neither joins Table 1; the missing enfake-hi/id neither
    assert table_rows("Table 1", paper, names) == ["en-es", "enfake-es", "enfake-es/id", "en-ru", "enfake-ru",
                                                   "enfake-ru/id"]
    assert table_rows("Table 2", ["enfake-es", "enfake-es/perm1"], names) == ["enfake-es", "enfake-es/perm1"]


def test_id_shift_reading_compares_both_fake_englishes_with_en_x_by_hand():
    from xlrepro.papers.k2020.report import id_shift_reading
    rows = [("en-ru", 0.30), ("en-ru", 0.32), ("en-ru", 0.34),                  # 32.0 ± 2.0
            ("enfake-ru", 0.20), ("enfake-ru", 0.22), ("enfake-ru", 0.24),      # 22.0 ± 2.0: costs 10.0
            ("enfake-ru/id", 0.18), ("enfake-ru/id", 0.21), ("enfake-ru/id", 0.24),  # 21.0 ± 3.0: costs 11.0
            ("en-es", 0.50), ("enfake-es", 0.30), ("enfake-es/id", 0.40), ("en-hi", 0.3)]  # es: one seed each
    results = pd.DataFrame([{"experiment": e, "seed": i % 3, "language": e.split("-")[1].split("/")[0],
                             "task": "sections", "metric": "accuracy", "value": v} for i, (e, v) in enumerate(rows)])
    text = id_shift_reading(results).replace("\u00a0", " ")
    assert "- ru: en-ru 32.0 ± 2.0. The id shift, enfake-ru/id, 21.0 ± 3.0: 11.0 points lower" in text
    assert "the Unicode shift, enfake-ru, 22.0 ± 2.0: 10.0 points lower" in text
    # 2 SE of the difference: 2 * sqrt(4/3 + 9/3) = 4.2; -1.0 is within it
    assert "differ by -1.0 points, within 2 SE (4.2)" in text
    assert "- es: en-es 50.0 (1 seed)" in text and "One seed of the id shift" in text
    assert "hi:" not in text  # en-hi alone
    assert id_shift_reading(results[~results.experiment.str.endswith("/id")]) == ""


def test_mixed_reading_places_the_mixed_pairs_between_the_monolingual_ones_by_hand():
    from xlrepro.papers.k2020.report import mixed_reading
    rows = [("ru", 0.20), ("ru", 0.22), ("ru", 0.24), ("enfake>ru", 0.50), ("enfake>ru", 0.52), ("enfake>ru", 0.54),
            ("ru>enfake", 0.40), ("ru>enfake", 0.42), ("ru>enfake", 0.44), ("enfake", 0.80), ("enfake", 0.82),
            ("enfake", 0.84)]
    results = pd.DataFrame([{"experiment": "enfake-ru", "seed": i % 3, "language": l, "task": "sections",
                             "metric": "accuracy", "value": v} for i, (l, v) in enumerate(rows)])
    text = mixed_reading(results).replace("\u00a0", " ")
    # ru 22, Fake-English 82: 52 is 50% of the way, 42 is 33%
    assert "- ru: ru pairs 22.0 ± 2.0, enfake>ru 52.0 ± 2.0, ru>enfake 42.0 ± 2.0, Fake-English pairs 82.0 ± 2.0" in text
    assert "lie 50% and 33% of the way" in text and "es:" not in text
    assert mixed_reading(results[results.language != "ru>enfake"]) == ""


def test_compute_notes_share_a_stack_among_its_members_and_count_a_retrained_model_once(tmp_path, monkeypatch):
    import json

    from xlrepro.papers.k2020.bbert import Cell
    from xlrepro.papers.k2020.report import compute_notes, run_folder
    monkeypatch.setenv("XLREPRO_RUNS", str(tmp_path))
    stacks = run_folder("lab") / "stacks"
    for key, members, seconds, device in (
            ("a", ["en-es/0", "en-es/1", "enfake-ru/L12H12/3.2%/0"], 600.0, "NVIDIA H100"),  # 200 s each
            ("b", ["en-es/1", "en-hi/0"], 300.0, "NVIDIA H200"),   # en-es/1 again (150 s): counted at (200 + 150) / 2
            ("c", ["en-ru/0"], 999.0, "NVIDIA A100")):             # en-ru is not in the chapter's results
        (stacks / key).mkdir(parents=True)
        (stacks / key / "timing.json").write_text(json.dumps({"members": members, "train_seconds": seconds,
                                                              "device": device}))
    nsp = Cell(None, "lab", "enfake-es/nsp").dir
    nsp.mkdir(parents=True)
    (nsp / "timing_0.json").write_text(json.dumps({"seeds": [0], "seconds": 90.0, "device": "NVIDIA H200"}))
    rows = [("en-es", 0, "accuracy", 0.5), ("en-es", 0, "finetune_seconds", 60.0), ("en-es", 1, "accuracy", 0.5),
            ("en-es", 1, "finetune_seconds", 120.0), ("enfake-ru/L12H12/3.2%", 0, "accuracy", 0.2),
            ("enfake-es/nsp", 0, "finetune_seconds", 60.0), ("en-hi", 1, "accuracy", 0.3),  # en-hi/1 has no record
            ("majority/en-es", -1, "accuracy", 0.25)]
    results = pd.DataFrame([{"experiment": e, "seed": s, "language": "es", "task": "sections", "metric": m,
                             "value": v} for e, s, m, v in rows])
    notes = compute_notes(results, ["en-es", "enfake-ru/L12H12/3.2%", "enfake-es/nsp", "en-hi", "en-ru"])
    # 200 + 175 + 200 + 90 = 665 s = 11 minutes; en-hi/1 has no record; fine-tuning 240 s = 4 minutes
    assert notes["pre-training"] == ("11 worker-minutes for the 4 of its 5 published models whose training record "
                                     "came back (1 trained twice, counted once)")
    assert notes["fine-tuning"] == "4 worker-minutes for 3 fine-tunings (every task)"
    assert notes["training devices"] == "NVIDIA H100, NVIDIA H200"
    empty = compute_notes(results.iloc[:0], ["en-es"])
    assert empty["pre-training"] == "no training record" and empty["fine-tuning"] == "no fine-tuning record"
    # by table: en-es and en-hi serve Table 1 (200 + 175 s = 6.25 min pre-training, 180 s fine-tuning); the borrowed
    # cells go under their own first table, after it: L12H12/3.2% (Table 6) 200 s, enfake-es/nsp (Table 8) 90 + 60 s;
    # en-ru has no result and no row
    from xlrepro.papers.k2020.report import cost_by_table
    names = ["en-es", "enfake-ru/L12H12/3.2%", "enfake-es/nsp", "en-hi", "en-ru"]
    table = cost_by_table(results, names, ["Table 1"])
    assert table.to_dict("list") == {
        "table": ["Table 1", "Table 6", "Table 8"], "experiments": [2, 1, 1], "models": [3, 1, 1],
        "pre-training worker-min": [6.2, 3.3, 1.5], "models with a training record": [2, 1, 1],
        "fine-tunings": [2, 0, 1], "fine-tuning worker-min": [3.0, 0.0, 1.0]}


def test_trend_frames_hold_only_complete_series():
    from xlrepro.papers.k2020.config import experiments_of, load_plan
    from xlrepro.papers.k2020.report import derived

    def acc(name, lang, value, seed=0):
        return {"experiment": name, "seed": seed, "language": lang, "task": "sections", "metric": "accuracy",
                "value": value}
    base = [acc("enfake-ru", "enfake", 0.88), acc("enfake-ru", "ru", 0.18)]
    only_base = derived(pd.DataFrame(base))
    assert "depth" not in only_base and "heads" not in only_base and "permutation" not in only_base
    depth = [acc(n, l, v) for n in experiments_of(load_plan(), "t4") for l, v in (("enfake", 0.9), ("ru", 0.3))]
    perm = [acc(n, "es", v) for n, v in (("enfake-es", 0.32), ("enfake-es/perm0.25", 0.30),
                                          ("enfake-es/perm0.5", 0.28), ("enfake-es/perm1", 0.26))]
    frames = derived(pd.DataFrame(depth + perm + [acc("enfake-hi", "hi", 0.3)]))  # hi has p = 0 only
    assert sorted(frames["depth"]["depth"].unique()) == [1, 2, 4, 6, 12, 18, 24]
    assert set(frames["permutation"]["experiment"]) == {"enfake-es"}
    assert frames["permutation"].sort_values("p")["value"].tolist() == [0.32, 0.30, 0.28, 0.26]
    assert "heads" not in frames


def test_claims_frames_are_the_chapters_derived_frames_and_the_source_margin_of_every_run(tmp_path):
    from xlrepro.papers.k2020 import PAPER
    from xlrepro.papers.k2020.report import derived
    from xlrepro.results import write_csv

    def acc(name, lang, value, seed):
        return {"experiment": name, "seed": seed, "language": lang, "task": "sections", "metric": "accuracy",
                "value": value}
    arch = [acc("enfake-ru", "enfake", 0.88, s) for s in (0, 1)] + [acc("enfake-ru", "ru", 0.2, s) for s in (0, 1)]
    arch += [acc("majority/enfake-ru", "enfake", 0.25, -1), acc("majority/enfake-ru", "ru", 0.25, -1)]
    ling = [acc("en-es", "en", 0.25, 0), acc("en-es", "es", 0.3, 0), acc("majority/en-es", "en", 0.25, -1)]
    write_csv(pd.DataFrame(arch), tmp_path / "architecture.csv")
    write_csv(pd.DataFrame(ling), tmp_path / "linguistic.csv")
    frames = PAPER.claims_frames("architecture", tmp_path)
    assert set(frames) == set(derived(pd.DataFrame(arch))) | {"source_over_majority"}
    pd.testing.assert_frame_equal(frames["transfer"].reset_index(drop=True), pd.DataFrame(arch), check_dtype=False)
    margin = frames["source_over_majority"]  # every chapter's runs, on their own fine-tuning language
    assert margin[["experiment", "seed", "language"]].values.tolist() == [["en-es", 0, "en"],
                                                                           ["enfake-ru", 0, "enfake"],
                                                                           ["enfake-ru", 1, "enfake"]]
    assert margin["value"].round(6).tolist() == [0.0, 0.63, 0.63]
    with pytest.raises(ConfigError):
        PAPER.claims_frames("no_such_chapter", tmp_path)


def test_architecture_reading_names_the_cells_above_the_majority_and_the_seeds_that_learnt_nothing():
    from xlrepro.papers.k2020.report import architecture_reading, failed_seeds

    def acc(name, lang, value, seed):
        return {"experiment": name, "seed": seed, "language": lang, "task": "sections", "metric": "accuracy",
                "value": value}
    rows = []
    for name, fake, ru in (("enfake-ru", 0.88, 0.20), ("enfake-ru/L6H6/14.2%", 0.80, 0.35),
                           ("enfake-ru/L12H12/213.2%", 0.25, 0.22)):
        for seed in (0, 1, 2):
            rows += [acc(name, "enfake", fake, seed), acc(name, "ru", ru + 0.01 * seed, seed)]
        rows += [acc(f"majority/{name}", "enfake", 0.25, 0), acc(f"majority/{name}", "ru", 0.25, 0)]
    rows[0]["value"] = 0.26  # enfake-ru seed 0 at the majority class on its own language: learnt nothing
    results = pd.DataFrame(rows)
    failed = failed_seeds(results)
    assert failed[["experiment", "seed"]].values.tolist() == [["enfake-ru", 0], ["enfake-ru/L12H12/213.2%", 0],
                                                              ["enfake-ru/L12H12/213.2%", 1],
                                                              ["enfake-ru/L12H12/213.2%", 2]]
    text = architecture_reading(results, ["enfake-ru", "enfake-ru/L6H6/14.2%", "enfake-ru/L12H12/213.2%"])
    assert "majority class is 25.0" in text and "reaches 21.0 ± 1.0: below it" in text
    assert "enfake-ru/L6H6/14.2% 36.0 ± 1.0 (6 layers, width 66" in text and "213.2% 2" not in text
    assert "smaller or shallower than the base" in text
    assert "4 seed(s)" in text and "enfake-ru seed 0; enfake-ru/L12H12/213.2% seeds 0, 1, 2" in text
    assert architecture_reading(results[results.experiment.str.contains("L6H6")], ["enfake-ru/L6H6/14.2%"]) == ""
    from xlrepro.papers.k2020.report import architecture_figure
    fig = architecture_figure(results, ["enfake-ru", "enfake-ru/L6H6/14.2%", "enfake-ru/L12H12/213.2%"])
    assert [ax.get_title() for ax in fig.axes] == ["Table 4", "Table 5", "Table 6"]
    assert any(list(line.get_ydata()) == [25.0, 25.0] for line in fig.axes[2].lines)  # the majority class, dashed


def test_the_gate_table_passes_at_five_points_on_dev_and_the_reading_names_the_failures():
    from xlrepro.papers.k2020.report import gate_reading, gate_table

    def dev(name, lang, value, seed=0):
        return {"experiment": name, "seed": seed, "language": lang, "task": "sections", "metric": "dev_accuracy",
                "value": value}
    rows = [dev("en-es", "es", 0.40, s) for s in (0, 1)] + [dev("enfake-ru", "ru", 0.24, s) for s in (0, 1, 2)]
    rows += [dev("en-es", "en", 0.9), dev("majority/en-es", "es", 0.20), dev("majority/enfake-ru", "ru", 0.20)]
    gate = gate_table(pd.DataFrame(rows))
    assert gate[["experiment", "margin", "passes", "seeds"]].values.tolist() == [["en-es", 20.0, True, 2],
                                                                               ["enfake-ru", 4.0, False, 3]]
    text = gate_reading(gate)
    assert "Passes: en-es (+20.0 points, 2 seeds)" in text
    assert "Fails: enfake-ru (+4.0 points, 3 seeds): without a shared word piece" in text
    assert gate_table(pd.DataFrame([dev("enfake-ru/L1H12", "ru", 0.3)])).empty


def test_delta_table_puts_our_fake_minus_russian_beside_the_papers():
    from xlrepro.papers.k2020.report import delta_table
    rows = [{"experiment": "enfake-ru/L12H2", "seed": s, "language": lang, "task": "sections", "metric": "accuracy",
             "value": v} for s, (fake, ru) in enumerate(((0.90, 0.30), (0.80, 0.30), (0.85, 0.30)))
            for lang, v in (("enfake", fake), ("ru", ru))]
    table = delta_table(pd.DataFrame(rows), "Table 5")
    assert table.loc["enfake-ru/L12H2"].tolist() == ["15.5", "55.0\u00a0±\u00a05.0"]  # seeds: 60, 50, 55 points
    assert table.loc["enfake-ru", "ours"] == "" and table.loc["enfake-ru", "the paper"] == "13.3"


def test_a_cells_run_key_leaves_out_its_tables_and_tasks_but_not_what_it_computes(tmp_path):
    import dataclasses

    from xlrepro.papers.k2020.bbert import Cell
    plan = load_plan()

    def key(**change):
        exp = dataclasses.replace(plan.experiments["enfake-es"], **change)
        return Cell(dataclasses.replace(plan, experiments={**plan.experiments, "enfake-es": exp}), "smoke",
                    "enfake-es", root=tmp_path).key
    base = key()
    assert key(table=("Table 1",)) == key(tasks=("sections",)) == base  # presentation and schedule only
    assert key(permute=0.5) != base and key(layers=3) != base
    assert key(single=True) != base  # a field added later enters the key when set only ...
    # ... so the trained lab cells keep their folders (these keys name folders of the published runs)
    assert [Cell(plan, "lab", n, root=tmp_path).key for n in ("enfake-es", "enfake-es/nsp")] == [
        "929195bccb7159f2", "dbd5ed49ebbf2664"]


def test_the_pending_note_gives_one_command_for_all_parts():
    """One joined part string: one stack plan, and the same string to repeat until done."""
    from xlrepro.papers.k2020.report import pending_note
    note = pending_note(["t1", "t2"], ["en-hi", "enfake-hi"])
    assert "`xlrepro train k2020 --part t1,t2 --time-limit 480 --compile --workers-per-gpu 2 --eval-workers-per-gpu 4`" \
        in note and note.count("xlrepro train") == 1
    assert "2 experiment(s)" in note and "(en-hi, enfake-hi)" in note
    # the time is that of the two missing experiments (6 models), not of the parts' 19 experiments
    import re

    from xlrepro.papers.k2020.config import gpu_plan
    minutes = int(re.search(r"about (\d+) GPU-minutes", note).group(1))
    assert 0 < minutes < gpu_plan(load_plan(), ["t1", "t2"])["GPU-min"].sum() / 2
    # another profile: named in the command, and its estimate is that profile's (four times the steps: more)
    four = pending_note(["t1", "t2"], ["en-hi", "enfake-hi"], profile="alltext4x")
    assert "`xlrepro train k2020 --part t1,t2 --profile alltext4x --time-limit 480 " in four
    assert int(re.search(r"about (\d+) GPU-minutes", four).group(1)) > 2 * minutes


def test_the_pending_note_names_the_missing_cells_a_stronger_recipe_has(tmp_path):
    """A cell missing at the lab recipe but published at a stronger one: the note says where its claims are read;
    all of them there: not "pending"; some: pending, naming those that are."""
    import pandas as pd

    from xlrepro.papers.k2020.report import pending_note, recipe_cells
    (tmp_path / "recipe_x").mkdir()
    (tmp_path / "recipes.json").write_text('[{"name": "x", "label": "more text", "folder": "recipe_x"}]')
    pd.DataFrame({"experiment": ["enfake-es/adj", "majority/enfake-es/adj", "enfake-hi/adj"], "seed": 0,
                  "metric": "accuracy", "value": 0.5}).to_csv(tmp_path / "recipe_x" / "mixed_pairs.csv", index=False)
    cells = recipe_cells("mixed_pairs", tmp_path)
    assert cells == {"more text": ["enfake-es/adj", "enfake-hi/adj"]} and recipe_cells("linguistic", tmp_path) == {}
    assert recipe_cells("mixed_pairs", tmp_path, profile="x") == {}  # rendered at that recipe: not "stronger"
    with pytest.raises(ConfigError, match="valid choices|mixed_pairs"):
        recipe_cells("mixed-pairs", tmp_path)
    all_there = pending_note(["t11a"], ["enfake-es/adj", "enfake-hi/adj"], at_recipes=cells)
    assert all_there.startswith("**Not trained at this recipe.** 2 experiment(s) of this chapter have no trained "
                                "cells at `lab` (enfake-es/adj, enfake-hi/adj); a stronger recipe below has them all "
                                '(enfake-es/adj, enfake-hi/adj at "more text"), and a claim that reads only cells '
                                "published there reads it.")
    assert "Pending" not in all_there and "`xlrepro train k2020 --part t11a --time-limit 480" in all_there
    some = pending_note(["t11a"], ["enfake-es/adj", "enfake-ru/adj"], at_recipes=cells)
    assert some.startswith("**Pending the GPU run.** 2 experiment(s) of this chapter have no trained cells yet "
                           '(enfake-es/adj, enfake-ru/adj); a stronger recipe below has enfake-es/adj at "more text"')
    assert pending_note(["t11a"], ["enfake-ru/adj"], at_recipes=cells) == pending_note(["t11a"], ["enfake-ru/adj"])


def test_word_order_figure_from_hand_made_results():
    """Table 2's picture: our ru line goes through the seed means at p = 0 and p = 1 (25 and 15), the paper's lines
    through its printed numbers; nothing is drawn until a cell with p > 0 is trained."""
    import matplotlib.pyplot as plt
    from xlrepro.papers.k2020.report import word_order_figure, word_order_frame
    row = lambda e, s, v, lang="ru": {"experiment": e, "seed": s, "language": lang, "task": "sections",  # noqa: E731
                                      "metric": "accuracy", "value": v}
    base = [row("enfake-ru", 0, 0.20), row("enfake-ru", 1, 0.30), row("majority/enfake-ru", 0, 0.25),
            row("enfake-ru", 0, 0.90, "enfake")]  # the source language is not the target
    assert word_order_figure(pd.DataFrame(base)) is None
    results = pd.DataFrame(base + [row("enfake-ru/perm1", 0, 0.10), row("enfake-ru/perm1", 1, 0.20),
                                   row("majority/enfake-ru/perm1", 0, 0.25)])
    frame = word_order_frame(results)
    ours = frame[frame["source"] == "ours"]
    assert ours[["p", "seed"]].values.tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]
    assert ours["accuracy"].tolist() == pytest.approx([20, 30, 10, 20])
    assert ours["majority"].tolist() == pytest.approx([25.0] * 4)
    fig = word_order_figure(results)
    paper_ax, ours_ax = fig.axes
    line = {ln.get_label(): ln for ln in ours_ax.lines}["ru"]
    assert list(line.get_xdata()) == [0, 1] and list(line.get_ydata()) == pytest.approx([25, 15])
    paper_ru = {ln.get_label(): ln for ln in paper_ax.lines}["ru"]
    assert list(paper_ru.get_ydata()) == pytest.approx([65.7, 63.6, 59.7, 53.6])  # Table 2, printed
    plt.close(fig)


def test_variants_figure_from_hand_made_results():
    """One panel per target; the base's es seeds (20, 30) as dots at x = 0 with their mean (25) as a bar, NSP's one
    seed (40) at x = 1, the majority class (25.4) dashed; a variant without results draws nothing; no results, no
    figure. The source language (enfake) is never plotted."""
    import matplotlib.pyplot as plt
    from xlrepro.papers.k2020.report import variants_figure
    row = lambda e, s, v, lang="es": {"experiment": e, "seed": s, "language": lang, "task": "sections",  # noqa: E731
                                      "metric": "accuracy", "value": v}
    columns = [("base", "enfake-{t}"), ("NSP", "enfake-{t}/nsp"), ("char", "enfake-{t}/char")]
    results = pd.DataFrame([row("enfake-es", 0, 0.20), row("enfake-es", 1, 0.30), row("enfake-es/nsp", 0, 0.40),
                            row("enfake-es", 0, 0.90, "enfake"), row("majority/enfake-es", -1, 0.254)])
    assert variants_figure(results.iloc[:0], columns) is None
    assert variants_figure(results[results["experiment"] == "majority/enfake-es"], columns) is None
    fig = variants_figure(results, columns, targets=("es", "ru"))
    es, ru = fig.axes
    dots = [c.get_offsets().tolist() for c in es.collections]
    assert dots == [[[0, 20], [0, 30]], [[1, 40]]] and not ru.collections
    bars = [(list(ln.get_xdata()), list(ln.get_ydata())) for ln in es.lines]
    assert bars[0] == ([-0.3, 0.3], pytest.approx([25, 25])) and bars[1] == ([0.7, 1.3], pytest.approx([40, 40]))
    assert list(bars[2][1]) == pytest.approx([25.4, 25.4])  # the majority class, dashed
    assert [t.get_text() for t in es.get_xticklabels()] == ["base", "NSP", "char"]
    plt.close(fig)


@pytest.mark.parametrize("chapter", ["linguistic", "architecture", "input_objective", "mixed_pairs"])
def test_the_reproduce_box_names_the_chapters_parts_and_the_current_estimate(chapter):
    """The box's parts are the chapter's PARTS (constants.PARTS), its commands one joined part string, and its GPU-minutes what
    `gpu_plan` says now (an estimate written into the text goes stale when the speed model changes)."""
    import json
    import re
    from pathlib import Path

    from xlrepro.papers.k2020.config import gpu_plan, load_plan
    nb = json.loads((Path(__file__).resolve().parents[1] / "notebooks" / "k2020" / f"{chapter}.ipynb").read_text())
    text = "".join("".join(c["source"]) for c in nb["cells"])
    from xlrepro.papers.k2020.constants import PARTS
    assert f'CHAPTER = "{chapter}"' in text and "R.PARTS[CHAPTER]" in text  # the chapter reads the package's parts
    parts = list(PARTS[chapter])
    minutes, named = re.search(r"about (\d+) GPU-minutes on an H200 for the B-BERTs of ([t0-9gca, ]+?) and", text).groups()
    assert named.split(", ") == parts
    assert int(minutes) == round(float(gpu_plan(load_plan(), parts, gpu="H200")["GPU-min"].sum()))
    assert f"--part {','.join(parts)} --time-limit 540" in text and f"--part {','.join(parts)} --dry-run" in text


def test_every_table_of_the_plan_has_one_chapter():
    from xlrepro.papers.k2020 import CHAPTERS
    from xlrepro.papers.k2020.config import load_plan
    from xlrepro.papers.k2020.report import CHAPTER_TABLES
    assert set(CHAPTER_TABLES) == set(CHAPTERS)
    served = {t for e in load_plan().experiments.values() for t in e.table}
    listed = [t for ts in CHAPTER_TABLES.values() for t in ts]
    assert sorted(listed) == sorted(served) == sorted(f"Table {k}" for k in range(1, 12))


def test_corpus_card_for_readers_writes_each_number_once_and_readably():
    from xlrepro.papers.k2020.report import corpus_card_for_readers

    card = pd.DataFrame({"language": ["en", "hi"], "side": ["source (half 0)", "target (half 1)"],
                         "chapters": [488, 480], "lines": [12541, 12664], "words": [303923, 314224],
                         "MB": [1.6, 3.88], "share_of_1GB": [1.6e-3, 3.88e-3]})
    shown = corpus_card_for_readers(card)
    assert shown.values.tolist() == [
        ["en", "source (half 0)", "488", "12,541", "303,923", "1.60", "0.16 %"],
        ["hi", "target (half 1)", "480", "12,664", "314,224", "3.88", "0.39 %"]]


def test_chapter_claims_table_marks_untrained_cells_pending_and_writes_the_chapters_rows(tmp_path):
    from xlrepro.claims import PENDING
    from xlrepro.papers.k2020.report import chapter_claims_table
    from xlrepro.results import read_claims

    table = chapter_claims_table("mixed_pairs", tmp_path, todo=["enfake-es"])  # nothing trained yet
    ids = ["mixed_pairs_drop", "mixed_pairs_drop_adjacency_es", "mixed_pairs_drop_adjacency_hi",
           "mixed_pairs_drop_adjacency_ru"]
    assert table["id"].tolist() == ids and table["verdict"].tolist() == [PENDING] * 4
    assert read_claims(tmp_path / "claims.csv")["id"].tolist() == ids


def test_chapter_claims_table_shows_every_claim_pending_where_no_selector_finds_a_cell(tmp_path, monkeypatch):
    import xlrepro.claims
    from xlrepro.papers.k2020.report import PENDING_RUN, chapter_claims_table

    def no_cell(*args, **kwargs):
        raise KeyError("enfake-es")
    monkeypatch.setattr(xlrepro.claims, "claims_table", no_cell)
    table = chapter_claims_table("mixed_pairs", tmp_path)
    assert table[["section", "evidence", "verdict"]].values.tolist() == [["§4, Table 11", "", PENDING_RUN]] * 4
    assert table["claim"].iloc[0].startswith("Pairs with the two verses in different languages")
    assert table["claim"].iloc[1:].str.startswith("On the adjacency task, pairs with one verse Fake-English").all()
    assert not (tmp_path / "claims.csv").exists()
    with pytest.raises(ConfigError, match="valid choices: linguistic, architecture, input_objective, mixed_pairs"):
        chapter_claims_table("mixed", tmp_path)


def test_prediction_shares_name_the_most_predicted_class():
    from xlrepro.papers.k2020.bbert import prediction_shares
    assert prediction_shares([2, 2, 2, 1], 6) == [("top_prediction_share", 0.75), ("top_prediction_class", 2.0)]
    assert prediction_shares([3, 1, 1, 3], 6) == [("top_prediction_share", 0.5), ("top_prediction_class", 1.0)]  # tie


def test_a_profile_s_left_out_parts_are_not_run_and_their_claims_are_inconclusive(tmp_path):
    """alltext4x leaves out t1g, t8c and fp8check (experiments.yaml): "all" drops their own experiments (t1g's enfake-ru cell
    stays, Table 6 needs it), naming one is an error with the reason and the valid parts, the chapter lists them as
    not run, and a claim on them is inconclusive (not_run) rather than pending for ever."""
    from xlrepro.config import ConfigError
    from xlrepro.papers.k2020.config import experiments_of, not_run
    from xlrepro.papers.k2020.report import chapter_claims_table, pending_note
    plan = load_plan()
    every, kept = experiments_of(plan, "all"), experiments_of(plan, "all", "alltext4x")
    assert sorted(set(every) - set(kept)) == sorted(["en-es/L12H12/22.3%", "enfake-es/L12H12/22.3%",
                                                     "en-hi/L12H12/22.3%", "enfake-hi/L12H12/22.3%",
                                                     "en-ru/L12H12/22.3%", "enfake-es/single", "enfake-hi/single",
                                                     "enfake-ru/single", "en-es/mm", "en-es/fp8"])  # + fp8check
    assert experiments_of(plan, "all", "lab") == every  # the lab runs every part
    with pytest.raises(ConfigError, match=r"does not run part t8c \(t8c: Table 8's control.*its parts: pilot, base"):
        experiments_of(plan, "t8,t8c", "alltext4x")
    skipped = not_run(plan, ["t1", "t1g", "t2", "t3"], "alltext4x")
    assert "enfake-ru/L12H12/22.3%" in skipped and "en-es" not in skipped  # t6 is not among these parts
    assert not_run(plan, ["t1", "t1g"], "lab") == {}
    assert "--part t1,t2,t3 --profile alltext4x " in pending_note(["t1", "t1g", "t2", "t3"], ["en-hi"], "alltext4x")
    # a gate-size claim reads t1g's cells: inconclusive, with the profile's reason; the others as before
    table = chapter_claims_table("linguistic", tmp_path, todo=[], not_run=skipped).set_index("id")
    assert table.loc["transfer_without_overlap_gate_size", "verdict"] == "inconclusive"
    assert table.loc["transfer_without_overlap_gate_size", "reason"] == "not_run"
    assert "part t1g is left out at profile alltext4x" in table.loc["transfer_without_overlap_gate_size", "evidence"]
    assert table.loc["spanish_transfers_best", "verdict"] == "pending"  # no results here at all


def test_an_adjacency_run_that_never_left_its_majority_class_is_a_failed_run():
    """Seed 0 of enfake-es/adj scores 51 % on its own (Fake-English) adjacency pairs, 1 point above the 50 % majority
    class: the health rule adjacency_never_left_majority marks it failed; seed 1 (80 %) passes; the section task's
    rule does not read adjacency rows."""
    from xlrepro.health import FAILED, OK, assess, load_rules
    from xlrepro.papers.k2020.report import source_over_majority
    rows = [dict(experiment="enfake-es/adj", seed=s, language="enfake", task="adjacency", metric="adjacency_accuracy",
                 value=v) for s, v in ((0, 0.51), (1, 0.8))]
    rows.append(dict(experiment="majority/enfake-es/adj", seed=-1, language="enfake", task="adjacency",
                     metric="adjacency_accuracy", value=0.5))
    margin = source_over_majority(pd.DataFrame(rows))
    assert margin["metric"].tolist() == ["adjacency_over_majority"] * 2
    assert margin["value"].tolist() == pytest.approx([0.01, 0.30])
    health = assess(load_rules("k2020"), {"source_over_majority": margin})
    mine = health[health["rule"] == "adjacency_never_left_majority"].sort_values("seed")
    assert mine["status"].tolist() == [FAILED, OK]
    assert "never_left_majority" not in set(health["rule"])  # no section-task row to read


def test_the_adjacency_reading_says_where_the_mixed_pairs_fall():
    """Hand-made adjacency results: hi's mixed pairs 2 and 4 points above its own pairs (2 SE 1.6 and 2.6: beyond),
    its own pairs 4 points above 50 % (below the precondition's 5); ru's one order below; a cell without
    Fake-English pairs is left out."""
    import pandas as pd

    from xlrepro.papers.k2020.report import adjacency_reading
    values = {("enfake-hi/adj", "hi"): [0.53, 0.54, 0.55], ("enfake-hi/adj", "enfake>hi"): [0.55, 0.56, 0.57],
              ("enfake-hi/adj", "hi>enfake"): [0.56, 0.58, 0.60], ("enfake-hi/adj", "enfake"): [0.76, 0.76, 0.76],
              ("enfake-ru/adj", "ru"): [0.60, 0.60, 0.60], ("enfake-ru/adj", "enfake>ru"): [0.55, 0.55, 0.55],
              ("enfake-ru/adj", "ru>enfake"): [0.61, 0.61, 0.61], ("enfake-ru/adj", "enfake"): [0.77, 0.77, 0.77],
              ("enfake-es/adj", "es"): [0.55, 0.55, 0.55]}
    rows = [{"experiment": e, "seed": s, "language": lang, "metric": "adjacency_accuracy", "value": v}
            for (e, lang), vs in values.items() for s, v in enumerate(vs)]
    text = adjacency_reading(pd.DataFrame(rows))
    assert "- hi: hi pairs 54.0 ± 1.0; enfake>hi 56.0 ± 1.0 (+2.0 points, 2 SE 1.6), hi>enfake 58.0 ± 2.0 (+4.0 " \
           "points, 2 SE 2.6); Fake-English pairs 76.0 ± 0.0." in text
    assert "enfake>ru 55.0 ± 0.0 (-5.0 points, 2 SE 0.0), ru>enfake 61.0 ± 0.0 (+1.0 points, 2 SE 0.0)" in text
    assert "- es" not in text
    assert "In 1 of 2 targets (hi) both mixed orders score above the target's own pairs beyond 2 SE, where the " \
           "paper's mixed pairs score below them." in text
    assert text.endswith("The adjacency model hardly transfers the task to hi (+4.0 points above 50 %; its claim's "
                         "precondition asks 5): its claim is inconclusive whatever the mixed pairs show.")
    assert adjacency_reading(pd.DataFrame(rows[-3:])) == "" and adjacency_reading(pd.DataFrame()) == ""
