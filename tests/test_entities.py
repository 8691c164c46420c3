"""The NER stand-in: type mapping, BIO conversion, entity F1, Fake-English carry-over, splits, spaCy on a few verses."""
import pytest

from xlrepro.tasks import entities as E


def test_type_mapping_known_answers():
    assert E.map_type("PERSON") == "PER"
    assert E.map_type("GPE") == "LOC" and E.map_type("LOC") == "LOC" and E.map_type("FAC") == "LOC"
    assert E.map_type("ORG") == "ORG"
    assert E.map_type("NORP") is None and E.map_type("DATE") is None
    with pytest.raises(ValueError, match="PERSON"):
        E.map_type("PERSONS")


def test_labels_are_bio_over_three_types():
    assert E.LABELS == ("O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG")


def test_bio_tags_from_character_spans():
    text = E.normalize("Then Moses went to Mount Sinai, and Aaron.")
    words = E.words_with_offsets(text)
    assert [w for w, _ in words] == ["Then", "Moses", "went", "to", "Mount", "Sinai", ",", "and", "Aaron", "."]
    spans = [(5, 10, "PER"), (19, 30, "LOC"), (36, 41, "PER")]  # Moses, Mount Sinai, Aaron
    assert E.bio_tags([o for _, o in words], spans) == \
        ["O", "B-PER", "O", "O", "B-LOC", "I-LOC", "O", "O", "B-PER", "O"]


def test_bio_tags_adjacent_entities_start_anew():
    # two spans touching word to word: the second starts with B-
    assert E.bio_tags([(0, 4), (5, 9)], [(0, 4, "PER"), (5, 9, "PER")]) == ["B-PER", "B-PER"]
    with pytest.raises(ValueError, match="PER, LOC, ORG"):
        E.bio_tags([(0, 4)], [(0, 4, "PERSON")])


def test_entity_chunks_conlleval_reading():
    assert E.entity_chunks(["B-PER", "I-PER", "O", "B-LOC"]) == {("PER", 0, 2), ("LOC", 3, 4)}
    assert E.entity_chunks(["O", "I-ORG", "I-ORG"]) == {("ORG", 1, 3)}  # I- after O opens an entity
    assert E.entity_chunks(["B-PER", "I-LOC"]) == {("PER", 0, 1), ("LOC", 1, 2)}  # type change splits
    with pytest.raises(ValueError, match="BIO"):
        E.entity_chunks(["X-PER"])


def test_entity_f1_hand_made():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    pred = [["B-PER", "I-PER", "O", "B-PER"], ["O", "O"]]
    # gold entities 3, predicted 2, correct 1 (the PER of two words); the wrong type at word 3 is no match
    p, r, f1 = E.entity_prf(gold, pred)
    assert p == pytest.approx(1 / 2) and r == pytest.approx(1 / 3) and f1 == pytest.approx(0.4)
    assert E.entity_prf([["B-PER", "I-PER"]], [["B-PER", "O"]]) == (0.0, 0.0, 0.0)  # wrong boundary: no credit
    assert E.entity_prf([["O"]], [["O"]]) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="2 gold"):
        E.entity_prf([["O"], ["O"]], [["O"]])


def test_fake_english_carries_labels_over():
    from tokenizers import pre_tokenizers

    from xlrepro.papers.k2020.data import shift_text, to_fake_unicode
    text = "And Jesus said to Peter, \"Go to Jerusalem!\""
    words = [w for w, _ in E.words_with_offsets(E.normalize(text))]
    fake_words = [w for w, _ in pre_tokenizers.BertPreTokenizer().pre_tokenize_str(to_fake_unicode(text))]
    # one fake word per word, each the shift of its word: word i's tag is fake word i's tag
    assert fake_words == [shift_text(w) for w in words]
    assert len(words) == 12


def test_labelled_languages():
    assert E.check_labelled("enfake") == "enfake"
    with pytest.raises(ValueError, match="en, enfake"):
        E.check_labelled("es")


def test_splits_are_chapter_disjoint():
    from xlrepro.data.multilingual import load_verses
    chapters = {s: set(zip(*(load_verses("en", s)[c] for c in ("book", "chapter")))) for s in ("train", "dev", "test")}
    assert chapters["train"] and chapters["dev"] and chapters["test"]
    assert not chapters["train"] & chapters["dev"] and not chapters["train"] & chapters["test"]
    assert not chapters["dev"] & chapters["test"]


def test_spacy_on_a_few_verses(tmp_path):
    paths = E.prepare_entities(tmp_path, ["dev"], max_verses=6, progress=False)
    df = E.silver_entities("dev", tmp_path, max_verses=6)
    assert len(df) == 6 and list(df.columns) == list(E.COLUMNS)
    assert all(len(w) == len(t) for w, t in zip(df["words"], df["tags"]))
    assert all(t in E.LABELS for tags in df["tags"] for t in tags)
    # spaCy itself: a verse-like sentence whose names it must find
    [(words, tags)] = E.tag_verses(["Moses went up from Egypt to Jerusalem with Aaron."])
    # (the small model misses "Moses" here: the labels are silver)
    assert tags[words.index("Aaron")] == "B-PER" and tags[words.index("Jerusalem")] == "B-LOC"
    assert tags[words.index("went")] == "O"
    assert paths["dev"].exists()


# ----------------------------------------------------------------------------------------------- K et al.'s cells
def test_k2020_task_declaration_is_checked():
    from xlrepro.config import ConfigError
    from xlrepro.papers.k2020.config import Experiment, load_plan
    with pytest.raises(ConfigError, match="sections, ner"):
        Experiment(pretrain=("enfake", "es"), finetune="enfake", test=("enfake", "es"), tasks=("sections", "pos"))
    with pytest.raises(ConfigError, match="include sections"):
        Experiment(pretrain=("enfake", "es"), finetune="enfake", test=("enfake", "es"), tasks=("ner",))
    with pytest.raises(ConfigError, match="en, enfake"):
        Experiment(pretrain=("es", "enfake"), finetune="es", test=("enfake", "es"), tasks=("sections", "ner"))
    plan = load_plan()
    ner = {n for n, e in plan.experiments.items() if "ner" in e.tasks}
    assert "en-enfake" in ner and "enfake-es/nsp" in ner and "enfake-ru/L1H12" not in ner  # Table 4 is XNLI only


def test_token_data_rejects_mismatched_lengths():
    import numpy as np

    from xlrepro.training.token_finetune import EncodedTokens
    with pytest.raises(ValueError, match="3 ids but 2 labels"):
        EncodedTokens([np.arange(3)], [np.zeros(2, np.int64)])


def test_cell_labels_carry_over_to_fake_english(tmp_path):
    import numpy as np

    from xlrepro.papers.k2020.bbert import Cell
    from xlrepro.training.token_finetune import IGNORE
    cell = Cell(None, "smoke", "en-enfake", seeds=[0], root=tmp_path / "runs", cache_dir=tmp_path)
    E.prepare_entities(tmp_path, ["dev"], max_verses=8, progress=False)
    en, gold_en, skipped_en = cell.ner_data("en", "dev", max_verses=8)
    fake, gold_fake, skipped_fake = cell.ner_data("enfake", "dev", max_verses=8)
    assert skipped_en == skipped_fake == 0 and gold_en == gold_fake
    words = E.silver_entities("dev", tmp_path, max_verses=8)["words"]
    for x, y, g, w in zip(en.ids, en.labels, gold_en, words):
        assert x[0] == cell.ids["[CLS]"] and y[0] == y[-1] == IGNORE and len(g) == len(w)
        labelled = [E.LABELS[i] for i in y[y != IGNORE]]  # one label per word that fits max_length (48 here)
        assert labelled == g[:len(labelled)] and (len(labelled) == len(g) or len(x) == 48)
    for a, b in zip(en.labels, fake.labels):  # the same labels, as far as both fit
        a, b = a[a != IGNORE], b[b != IGNORE]
        n = min(len(a), len(b))
        assert n > 0 and np.array_equal(a[:n], b[:n])
    assert not set(np.concatenate(en.ids)[1:-1]) & set(np.concatenate(fake.ids)) - set(cell.special)
