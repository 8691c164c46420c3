"""The LibreOffice help loader on a hand-made two-language help tree (tests/fixtures/libreoffice)."""
from pathlib import Path

import pytest

from xlrepro.config import ConfigError
from xlrepro.data import libreoffice as L

FIXTURE = Path(__file__).parent / "fixtures" / "libreoffice"
A, B, C = "text/shared/a.html", "text/shared/b.html", "text/swriter/c.html"

EN = [
    (A, "hd_id1", "About the Help"),
    (A, "par_id1", "The Help menu opens the help pages."),  # markup stripped, whitespace runs -> one space
    (A, "par_id2", "Press Ctrl + F to search the page."),  # the default variant of a platform switch only
    # par_id3: an icon only; par_id4: a menu path of 2 words; par_id5: an embedded copy; par_id6 and the
    # <pre>: code; bm_id2: not a translatable paragraph id; par_id11: symbols only
    (A, "par_id7", "Cut & paste text with the mouse."),
    # b.html par_id1 repeats a.html par_id1: kept once, in the first file
    (B, "par_id8", "Choose a file in the dialog box."),
    (B, "par_id9", "First line second line of text."),  # <br/> is a space
    (C, "hd_id10", "Writer formats letters"),
    (C, "par_id10", "Writer formats the text of letters."),
]
RU = [
    (A, "hd_id1", "О справке LibreOffice"),
    (A, "par_id1", "Меню Справка открывает страницы справки."),
    (A, "par_id2", "Нажмите Ctrl + F для поиска."),
    # par_id4 "Сервис - Параметры": 3 words but 2 with a letter; par_id7: untranslated (the English text)
    (B, "par_id8", "Выберите файл в диалоговом окне."),
    (C, "par_id10", "Writer форматирует текст писем."),
]


@pytest.fixture
def help_tree(monkeypatch):
    monkeypatch.setenv(L.ENV_ROOT, str(FIXTURE))
    return FIXTURE


def rows(df):
    return [tuple(r) for r in df[["file", "para_id", "text"]].itertuples(index=False)]


def test_language_codes_and_packages():
    assert L.LANGUAGE_CODES["en"] == "en-US" and L.LANGUAGE_CODES["zh"] == "zh-CN" and L.LANGUAGE_CODES["ru"] == "ru"
    assert L.package("en") == "libreoffice-help-en-us"
    assert L.package("zh") == "libreoffice-help-zh-cn"
    with pytest.raises(ConfigError, match="valid choices: .*en.*ru"):
        L.package("sw")


def test_help_root_follows_the_environment(monkeypatch):
    monkeypatch.delenv(L.ENV_ROOT, raising=False)
    assert L.help_root() == Path("/usr/share/libreoffice/help")
    monkeypatch.setenv(L.ENV_ROOT, "/somewhere/help")
    assert L.help_root() == Path("/somewhere/help")


def test_known_paragraphs(help_tree, tmp_path):
    assert rows(L.paragraphs("en", tmp_path)) == EN
    assert rows(L.paragraphs("ru", tmp_path)) == RU


def test_paragraphs_align_by_file_and_id(help_tree, tmp_path):
    en, ru = L.paragraphs("en", tmp_path), L.paragraphs("ru", tmp_path)
    pairs = en.merge(ru, on=["file", "para_id"], suffixes=("_en", "_ru"))
    assert list(zip(pairs["text_en"], pairs["text_ru"])) == [
        ("About the Help", "О справке LibreOffice"),
        ("The Help menu opens the help pages.", "Меню Справка открывает страницы справки."),
        ("Press Ctrl + F to search the page.", "Нажмите Ctrl + F для поиска."),
        ("Choose a file in the dialog box.", "Выберите файл в диалоговом окне."),
        ("Writer formats the text of letters.", "Writer форматирует текст писем."),
    ]


def test_file_halves_are_seeded_and_per_file(help_tree, tmp_path):
    assert [L.file_half(f, 2020) for f in (A, B, C)] == [1, 0, 1]
    assert [L.file_half(f, 1) for f in (A, B, C)] == [0, 0, 1]  # another seed, another split
    assert [L.file_half(f, 2020) for f in (A, B, C)] == [1, 0, 1]  # the same on every call
    en = L.paragraphs("en", tmp_path)
    halves = en.assign(half=[L.file_half(f, 2020) for f in en["file"]])
    assert (halves.groupby("file")["half"].nunique() == 1).all()
    assert sorted(halves[halves["half"] == 0]["para_id"]) == ["par_id8", "par_id9"]


def test_cache_round_trip_without_the_package(help_tree, tmp_path, monkeypatch):
    built = L.paragraphs("ru", tmp_path)
    path = tmp_path / "libreoffice" / "help.ru.tsv.gz"
    assert path.exists() and (tmp_path / "libreoffice" / "help.ru.json").exists()
    first = path.read_bytes()
    monkeypatch.setenv(L.ENV_ROOT, str(tmp_path / "no-help-here"))  # a machine without the package
    again = L.paragraphs("ru", tmp_path)
    assert rows(again) == rows(built) == RU
    monkeypatch.setenv(L.ENV_ROOT, str(FIXTURE))
    L.paragraphs("ru", tmp_path, force=True)
    assert path.read_bytes() == first  # rebuilt byte for byte


def test_prepare_reports_paragraphs_and_words(help_tree, tmp_path, capsys):
    out = L.prepare_libreoffice(["en", "ru"], tmp_path)
    assert out["ru"] == {"files": 3, "paragraphs": 5, "words": 3 + 5 + 6 + 5 + 4}
    assert "libreoffice help ru: 5 paragraphs, 23 words" in capsys.readouterr().out
    with pytest.raises(ConfigError, match="valid choices"):
        L.prepare_libreoffice(["en", "xx"], tmp_path)


def test_missing_package_names_the_install_and_the_variable(tmp_path, monkeypatch):
    monkeypatch.setenv(L.ENV_ROOT, str(tmp_path / "no-help-here"))
    with pytest.raises(ConfigError) as err:
        L.paragraphs("ru", tmp_path / "cache")
    assert "apt-get install libreoffice-help-ru" in str(err.value) and L.ENV_ROOT in str(err.value)


def test_untranslated_check_needs_english(tmp_path, monkeypatch):
    (tmp_path / "help" / "ru" / "text").mkdir(parents=True)
    monkeypatch.setenv(L.ENV_ROOT, str(tmp_path / "help"))
    with pytest.raises(ConfigError, match="libreoffice-help-en-us"):
        L.paragraphs("ru", tmp_path / "cache")


def test_the_module_prepares_the_languages_it_is_given_and_refuses_an_unknown_one(monkeypatch, capsys):
    """`python -m xlrepro.data.libreoffice LANG ...`: known languages are built in the order given, with --force
    passed on; an unknown one exits 2 before any language is built, naming the valid ones."""
    import pandas as pd

    from xlrepro.data import libreoffice as L
    built = []

    def paragraphs(lang, cache_dir=None, force=False):
        built.append((lang, force))
        return pd.DataFrame({"file": ["a", "b"], "para_id": ["p1", "p2"], "text": ["one two three", "four five six"]})
    monkeypatch.setattr(L, "paragraphs", paragraphs)
    assert L.main(["ru", "en", "--force"]) == 0 and built == [("ru", True), ("en", True)]
    assert "libreoffice help ru: 2 paragraphs, 6 words (2 files)" in capsys.readouterr().out
    built.clear()
    assert L.main(["en", "xx"]) == 2 and built == []
    assert "unknown LibreOffice help language 'xx'; valid choices: en, zh" in capsys.readouterr().err
