"""scripts/node_cache.sh on a hand-made cache: the subset it copies, and its errors before any copy (its --liu subset
reads the package's language lists and dictionaries: its argument checks only here)."""
import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "node_cache.sh"


def fake_cache(root: Path) -> Path:
    ml = root / "multilingual"
    ml.mkdir(parents=True)
    (ml / "manifest.json").write_text("{}")
    for lang in ("en", "es", "fr"):
        (ml / f"bible.{lang}.tsv.gz").write_text(lang)
    for d in ("entities", "mbert"):  # no dufter2020: a note, not an error
        (root / d).mkdir()
        (root / d / "x.txt").write_text(d)
    return root


def run(cwd: Path, cache: Path, *langs):
    return subprocess.run(["bash", str(SCRIPT), *langs], cwd=cwd, capture_output=True, text=True, timeout=30,
                          env={**os.environ, "XLREPRO_CACHE": str(cache)})


def test_copies_the_named_bibles_the_manifest_and_the_folders(tmp_path):
    cache = fake_cache(tmp_path / "cache")
    r = run(tmp_path, cache, "en", "fr")
    assert r.returncode == 0, r.stderr
    node = tmp_path / ".cache" / "node"
    assert sorted(p.name for p in (node / "multilingual").iterdir()) == ["bible.en.tsv.gz", "bible.fr.tsv.gz",
                                                                         "manifest.json"]
    assert (node / "entities" / "x.txt").read_text() == "entities" and (node / "mbert").is_dir()
    assert "no " in r.stderr and "dufter2020" in r.stderr


def test_an_unprepared_language_names_the_prepared_ones_and_copies_nothing(tmp_path):
    cache = fake_cache(tmp_path / "cache")
    r = run(tmp_path, cache, "en", "xx")
    assert r.returncode == 2 and "no Bible for 'xx'" in r.stderr and "en es fr" in r.stderr
    assert not (tmp_path / ".cache" / "node").exists()
    r = run(tmp_path, tmp_path / "empty")
    assert r.returncode == 2 and "no prepared cache" in r.stderr


def test_options_are_checked_before_any_copy(tmp_path):
    cache = fake_cache(tmp_path / "cache")
    r = run(tmp_path, cache, "--fast")
    assert r.returncode == 2 and "unknown option '--fast'; valid: --liu" in r.stderr
    r = run(tmp_path, cache, "--liu", "en")
    assert r.returncode == 2 and "--liu takes no languages" in r.stderr
    assert not (tmp_path / ".cache").exists()
