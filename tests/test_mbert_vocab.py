"""mBERT's vocab.txt rebuilt from blingfire (skipped where blingfire==0.1.8 is not installed)."""
import sys

import pytest

pytest.importorskip("blingfire")

from xlrepro.data import mbert_vocab as mv  # noqa: E402

SENTENCES = {
    "en": ["Hello world", "In the beginning God created the heaven and the earth.",
           "The tokenizer splits unbelievably long words into pieces.",
           "She didn't pay $3.50 for 12 apples!"],
    "de": ["Straßenbahnhaltestelle am Hauptbahnhof.", "Im Anfang schuf Gott Himmel und Erde.",
           "Die Größe der Bäume überraschte uns.", "Er sagte: „Wir gehen nach Köln.“"],
    "fr": ["Au commencement, Dieu créa les cieux et la terre.", "L'été dernier, nous sommes allés à Noël.",
           "Où est la bibliothèque ? Je ne sais pas.", "Les œufs coûtent 2,30 € aujourd'hui."],
    "ru": ["В начале сотворил Бог небо и землю.", "Государственного значения не имеет.",
           "Ёлка стояла в углу, и дети радовались.", "Привет, мир! Как дела?"],
    "zh": ["起初，神创造天地。", "我们今天去北京大学。", "你好，世界！", "这是一个测试句子，包含English单词和123数字。"],
}


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("xlcache")


@pytest.fixture(scope="module")
def tok(cache):
    return mv.mbert_tokenizer(cache_dir=cache)


@pytest.fixture(scope="module")
def vocab(tok, cache):
    lines = (cache / "mbert" / "vocab.txt").read_text(encoding="utf-8").split("\n")
    assert lines[-1] == ""
    return lines[:-1]


def test_hello_world(tok):
    assert tok.encode("Hello world", add_special_tokens=False).ids == [31178, 11356]
    assert tok.encode("Hello world").ids == [101, 31178, 11356, 102]


def test_size_and_special_ids(tok, vocab):
    assert len(vocab) == tok.get_vocab_size() == mv.VOCAB_SIZE == 119_547
    for token, i in {"[PAD]": 0, "[UNK]": 100, "[CLS]": 101, "[SEP]": 102, "[MASK]": 103}.items():
        assert vocab[i] == token
        assert tok.token_to_id(token) == i
    assert len(set(vocab)) == len(vocab)  # ids stay aligned


def test_continuations_and_long_pieces(tok, vocab):
    assert vocab[10107] == "##s"  # "Hellos" -> Hello ##s
    assert tok.encode("Hellos", add_special_tokens=False).ids == [31178, 10107]
    assert vocab[10119] == "un" and vocab[31748] == "##bly"
    # 32+ byte pieces decode to "" with blingfire's default buffer; the rebuild recovers them
    assert vocab[28835] == "государственного"
    assert not any(p.startswith("[unused_blingfire_") for p in vocab)


def test_info_file(tok, cache):
    import json
    info = json.loads((cache / "mbert" / "vocab_info.json").read_text())
    assert info["size"] == 119_547 and info["empty_decoding"] == 0
    assert 40_000 < info["continuations"] < 50_000


def test_agreement_hand_picked(tok):
    texts = [s for group in SENTENCES.values() for s in group]
    assert len(texts) == 20
    assert mv.disagreements(texts, tok) == []
    assert mv.agreement(texts, tok) == 1.0


def test_known_difference_zero_width_non_joiner(tok):
    # HF drops U+200C/U+200D (format characters); blingfire splits the word there
    text = "শাখ\u200cা"
    assert mv.agreement([text], tok) == 0.0


def test_cached_vocab_is_reused(cache, tok):
    path = cache / "mbert" / "vocab.txt"
    mtime = path.stat().st_mtime_ns
    assert mv.mbert_vocab_path(cache) == path
    assert path.stat().st_mtime_ns == mtime


def test_rebuild_into_folder(tmp_path):
    path = mv.rebuild_mbert_vocab(tmp_path)
    assert path == tmp_path / "vocab.txt"
    assert path.read_text(encoding="utf-8").count("\n") == 119_547


def test_missing_blingfire_names_the_pin(monkeypatch):
    monkeypatch.setitem(sys.modules, "blingfire", None)
    with pytest.raises(ImportError, match=r"pip install blingfire==0\.1\.8"):
        mv._blingfire()
