"""The multilingual lab: the offline stand-ins the multilingual chapters use (the verse-aligned Bible in 22
languages, the MUSE-style bilingual dictionaries, the section task) and mini-mBERT, the encoder pretrained on them,
with a check that it is multilingual.

An entry of its own (kind "shared"): no paper's claim is tested in it, and no paper owns it. Its chapter is
``notebooks/multilingual/lab.ipynb`` (``xlrepro run multilingual/lab``), its results ``book/results/multilingual/``.
Its code stays where it is used: the data in `xlrepro.data.multilingual`, `xlrepro.data.dictionaries` and
`xlrepro.tasks.sections`, the encoder's plan and its published files with the Wu & Dredze chapters that fine-tune it
(`xlrepro.papers.wu2019.transfer`, `xlrepro.papers.wu2019.published`).
"""
from __future__ import annotations

from xlrepro.papers import Paper

NAME = "multilingual"
CHAPTER = f"{NAME}/lab"


def pending_training(chapter: str, parameters: dict) -> str | None:
    """The pretraining of the published encoder (mini-mBERT) where the chapter would start it: the "lab" model, not
    rendered from the published run's files (`published.lab_source`), and not pretrained yet. Else None."""
    if parameters.get("model", "lab") != "lab":
        return None
    from xlrepro.papers.wu2019.published import lab_source
    from xlrepro.papers.wu2019.transfer import load_plan, mini_mbert_for

    known = ("model", "languages", "retrieval_sentences")
    source, _ = lab_source(parameters.get("source", "auto"), publish=bool(parameters.get("publish")),
                           **{k: parameters[k] for k in known if k in parameters})
    if source == "published":
        return None
    config, _ = mini_mbert_for(load_plan(), "lab")
    if not (config.default_dir() / "training.json").exists():
        return f"pretraining mini-mBERT ({config.steps} steps; on a GPU: xlrepro pretrain mini-mbert)"
    return None


PAPER = Paper(
    name=NAME,
    title="The multilingual lab: corpus, dictionaries, task and mini-mBERT",
    chapters=(CHAPTER,),
    reproduce=(("pretrain", "mini-mbert"),),
    pending_training=pending_training,
    order=15,  # after Dufter & Schütze (English and Fake-English), before the papers on real languages
    kind="shared",
)
