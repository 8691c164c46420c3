"""The registry of the paper profile's resources: what each is, where it comes from, how big it is, its licence, and
the variable that points to a local copy.

`RESOURCES` maps a name to a `Resource`. How a resource is obtained (`how`):

* ``hub``: a Hugging Face hub repository (`hub_id`), fetched by `huggingface_hub.snapshot_download` into the hub's
  own cache (``HF_HOME``), where `load_encoder(hub_id)` finds it, also offline;
* ``url``: an archive at `url`, downloaded and unpacked into ``<cache>/paper/<name>/``;
* ``manual``: a licence or a registration stands between the files and a script: `instructions` say where to get
  them, and the variable `env` names the folder that holds them.

Wherever it came from, a resource is found at `$<env>` first, then in the cache (`locate`). Which chapters need
which resources is declared by each paper (`xlrepro.papers.Paper.resources`); `chapters_needing` reads it.
Sizes are approximate download sizes in bytes, for planning disk and time.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..config import choose
from ..paths import cache_dir
from .encoders import ENCODER_FILES, MBERT

HOW = ("hub", "url", "manual")


@dataclass(frozen=True)
class Resource:
    name: str = field(metadata={"help": "the registry's key"})
    description: str = field(metadata={"help": "what it is, in one line"})
    url: str = field(metadata={"help": "the upstream page or file"})
    size_bytes: int = field(metadata={"help": "approximate download size"})
    licence: str = field(metadata={"help": "the licence, in a few words"})
    env: str = field(metadata={"help": "the environment variable naming a local copy (a folder)"})
    how: str = field(metadata={"help": "hub, url or manual (see the module docstring)"})
    files: tuple[str, ...] = field(default=(), metadata={"help": "files whose presence in the folder means it is there"})
    hub_id: str | None = field(default=None, metadata={"help": "the hub repository (how='hub')"})
    subdir: str = field(default="", metadata={"help": "the folder inside the unpacked archive (how='url')"})
    instructions: str = field(default="", metadata={"help": "how to get it by hand (how='manual')"})

    def __post_init__(self):
        choose("way to obtain a resource", self.how, HOW)

    def cache_folder(self) -> Path:
        """Where a downloaded copy lives (how='url'; a manual copy may be put there too)."""
        return cache_dir() / "paper" / self.name / self.subdir


RESOURCES: dict[str, Resource] = {r.name: r for r in (
    Resource("mbert", "multilingual BERT, cased (Devlin et al. 2019): 12 layers, 104 languages' Wikipedia",
             f"https://huggingface.co/{MBERT}", 717_000_000, "Apache-2.0", "XLREPRO_MBERT", "hub",
             files=("config.json", "model.safetensors"), hub_id=MBERT),
    Resource("xnli", "XNLI 1.0 (Conneau et al. 2018): NLI dev and test sets in 15 languages, xnli.{dev,test}.tsv",
             "https://dl.fbaipublicfiles.com/XNLI/XNLI-1.0.zip", 17_900_000, "CC BY-NC 4.0", "XLREPRO_XNLI_DIR",
             "url", files=("xnli.dev.tsv", "xnli.test.tsv"), subdir="XNLI-1.0"),
    Resource("multinli", "MultiNLI 1.0 (Williams et al. 2018): 393k English NLI training pairs, jsonl",
             "https://cims.nyu.edu/~sbowman/multinli/multinli_1.0.zip", 227_000_000,
             "OANC and CC BY-SA 3.0 parts (see its data description)", "XLREPRO_MULTINLI_DIR", "url",
             files=("multinli_1.0_train.jsonl",), subdir="multinli_1.0"),
    Resource("mldoc", "MLDoc (Schwenk & Li 2018): 4-class Reuters news classification in 8 languages, LABEL<TAB>text",
             "https://github.com/facebookresearch/MLDoc", 150_000_000,
             "Reuters RCV1/RCV2 research agreement (NIST)", "XLREPRO_MLDOC_DIR", "manual",
             files=("english.train.1000", "english.dev", "english.test"),
             instructions="request RCV1 and RCV2 from NIST (https://trec.nist.gov/data/reuters/reuters.html), then "
                          "build the files with the scripts of https://github.com/facebookresearch/MLDoc"),
    Resource("conll2002", "CoNLL-2002 NER (Spanish, Dutch), IOB: esp.train/testa/testb, ned.train/testa/testb",
             "https://www.clips.uantwerpen.be/conll2002/ner/", 6_000_000, "research use (see the shared task's page)",
             "XLREPRO_CONLL_DIR", "manual", files=("esp.train", "esp.testb", "ned.train", "ned.testb"),
             instructions="download the data files from https://www.clips.uantwerpen.be/conll2002/ner/data/ into "
                          "one folder"),
    Resource("conll2003", "CoNLL-2003 NER (English, German), IOB: eng.train/testa/testb, deu.train/testa/testb",
             "https://www.clips.uantwerpen.be/conll2003/ner/", 10_000_000,
             "annotations free; text under the Reuters RCV1 (English) and ECI (German) licences",
             "XLREPRO_CONLL_DIR", "manual", files=("eng.train", "eng.testb", "deu.train", "deu.testb"),
             instructions="build eng.* from Reuters RCV1 (NIST) and deu.* from the ECI corpus with the scripts of "
                          "https://www.clips.uantwerpen.be/conll2003/ner/, into the CoNLL-2002 folder"),
    Resource("wikiann", "WikiANN NER (Pan et al. 2017) in Rahimi et al. 2019's splits, IOB with 'lang:' prefixes",
             "https://github.com/afshinrahimi/mmner", 40_000_000,
             "derived from Wikipedia (CC BY-SA); see the repository", "XLREPRO_WIKIANN_DIR", "manual",
             files=("en/train", "en/test"),
             instructions="download the per-language archives linked from https://github.com/afshinrahimi/mmner and "
                          "unpack each into <folder>/<lang>/ (train, dev, test)"),
    Resource("ud", "Universal Dependencies treebanks, .conllu (v2.2, the release Wu & Dredze used)",
             "https://universaldependencies.org", 350_000_000, "per treebank (mostly CC BY-SA 4.0)",
             "XLREPRO_UD_DIR", "manual", files=("UD_English-EWT",),
             instructions="download ud-treebanks-v2.2.tgz from https://lindat.mff.cuni.cz (hdl 11234/1-2837) and "
                          "unpack it"),
    Resource("muse", "MUSE bilingual dictionaries (Conneau et al. 2018), 'src tgt' per line: en-xx.txt and "
                     "en-xx.5000-6500.txt", "https://github.com/facebookresearch/MUSE", 20_000_000, "CC BY-NC 4.0",
             "XLREPRO_MUSE_DIR", "manual", files=("en-fr.txt",),
             instructions="download en-<lang>.txt and en-<lang>.5000-6500.txt for each language from "
                          "https://dl.fbaipublicfiles.com/arrival/dictionaries/ into one folder"),
    Resource("wikipedia", "Wikipedia text per language: pages-articles dumps through wikiextractor",
             "https://dumps.wikimedia.org", 45_000_000_000,
             "CC BY-SA 4.0 and GFDL", "XLREPRO_WIKI_DIR", "manual", files=("en",),
             instructions="download <lang>wiki-latest-pages-articles.xml.bz2 from https://dumps.wikimedia.org and run "
                          "`python -m wikiextractor.WikiExtractor <dump> -o <folder>/<lang>` (English alone is "
                          "about 22 GB compressed)"),
    Resource("pbc", "Parallel Bible Corpus (Mayer & Cysouw 2014): the Easy-to-Read and King James English editions",
             "http://www.paralleltext.info/data/", 10_000_000, "editions under copyright; research use on request",
             "XLREPRO_PBC_DIR", "manual", files=("eng-x-bible-easytoread.txt", "eng-x-bible-kingjames.txt"),
             instructions="ask the corpus's authors for eng-x-bible-easytoread.txt and eng-x-bible-kingjames.txt "
                          "(http://www.paralleltext.info/data/)"),
)}


def get_resource(name: str) -> Resource:
    """The resource called `name`; an unknown name raises ConfigError naming the valid ones."""
    return RESOURCES[choose("resource", name, RESOURCES)]


def locate(name: str) -> Path | None:
    """The folder holding resource `name`: $<env> if set, else its cache folder; None where its `files` are not all
    there. A hub resource is also found in the hub's cache (the snapshot's folder)."""
    res = get_resource(name)
    candidates = [Path(os.environ[res.env]).expanduser()] if os.environ.get(res.env) else []
    candidates.append(res.cache_folder())
    for folder in candidates:
        if folder.is_dir() and all((folder / f).exists() for f in res.files):
            return folder
    if res.how == "hub" and not os.environ.get(res.env):
        return _hub_snapshot(res)
    return None


def mbert_encoder(encoder: str | os.PathLike | None = None) -> str:
    """The encoder a paper-profile path loads: `encoder` where given, else $XLREPRO_MBERT or the prepared mBERT
    (`locate`), else the released mBERT's hub id."""
    if encoder is None:
        found = locate("mbert")
        encoder = str(found) if found is not None else MBERT
    return os.fspath(encoder)


def _hub_snapshot(res: Resource) -> Path | None:
    from huggingface_hub import snapshot_download

    try:
        folder = Path(snapshot_download(res.hub_id, local_files_only=True, allow_patterns=list(ENCODER_FILES)))
    except Exception:  # not in the cache (huggingface_hub's LocalEntryNotFoundError and kin)
        return None
    return folder if all((folder / f).exists() for f in res.files) else None


def chapters_needing(name: str) -> list[str]:
    """The chapters ('<paper>/<notebook>') whose paper profile needs resource `name`, in book order."""
    from ..papers import papers

    get_resource(name)
    return [chapter for paper in papers().values() for chapter in paper.chapters
            if name in paper.resources.get(chapter, ())]


def resources_for(chapters) -> list[str]:
    """The resources the paper profile of `chapters` needs, each once, in the registry's order."""
    from ..papers import papers

    needed = {r for paper in papers().values() for c in chapters for r in paper.resources.get(c, ())}
    return [name for name in RESOURCES if name in needed]
