"""Layer-wise probes of a frozen (multilingual) BERT.

* Wu & Dredze (2019), "Beto, Bentz, Becas", §6 ("language-specific information"): how well can the language of a
  sentence be told from one layer? A linear classifier is trained on the frozen model's mean-pooled features of that
  layer (ANCHORS.md: lr 1e-3, 10 epochs, learning rate halved on plateau), once per layer.
* A sanity check that a small multilingual BERT really is multilingual: sentence retrieval from the source language
  (English) to every other language, per layer, on translations of the same sentences.

The features of every layer are computed in one forward pass (`layer_features`) and stored as one
[layers + 1, N, hidden] tensor per language, so that the probes and retrieval only slice them.
"""
from __future__ import annotations

import pandas as pd
import torch
from torch import Tensor, nn

from ..data.collate import pad_batch
from .metrics import mean_pool, retrieval_precision

__all__ = ["layer_features", "word_features", "language_id_probe", "probe_layers", "retrieval_by_language"]


def _special_id(tokenizer, token: str) -> int:
    idx = tokenizer.token_to_id(token)
    if idx is None:
        raise ValueError(f"the tokenizer has no {token} token")
    return idx


def _checked_encoder(model, batch_size: int, max_length: int):
    """The BERT inside `model` (a BertForMaskedLM or BertModel), after checking the batch size and the length
    ([CLS] + pieces + [SEP], within the model's position embeddings)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if max_length < 3:
        raise ValueError(f"max_length must be >= 3 ([CLS], a piece, [SEP]), got {max_length}")
    bert = model.bert if hasattr(model, "bert") else model
    positions = getattr(bert.config, "max_position_embeddings", None)
    if positions is not None and max_length > positions:
        raise ValueError(f"max_length {max_length} exceeds the model's {positions} position embeddings")
    return bert


@torch.no_grad()
def layer_features(model, tokenizer, texts: list[str], *, device: str | torch.device = "cpu",
                   batch_size: int = 128, max_length: int = 128) -> Tensor:
    """Mean-pooled sentence vectors of every layer: [layers + 1, N, hidden] float32 on the CPU.

    Index 0 is the embedding output, index k the output of transformer layer k. Each text becomes
    ``[CLS] pieces[:max_length - 2] [SEP]`` (the way mini-mBERT was pretrained, so [SEP] stays last when truncated),
    and its vector is the mean over all of its positions, [CLS] and [SEP] included, [PAD] excluded. Wu & Dredze pool
    every non-padding position.

    Texts are sorted by length and each batch is padded only to its longest text, which keeps padding (and time)
    small; the rows come back in the order of ``texts``. Thanks to the attention mask a text's vector does not
    depend on which texts share its batch (up to float rounding). ``model`` (a BertForMaskedLM or BertModel) must
    already live on ``device``; it is run in eval mode and its previous train/eval mode is restored afterwards.
    """
    texts = list(texts)
    if not texts:
        raise ValueError("layer_features needs at least one text")
    bert = _checked_encoder(model, batch_size, max_length)
    cls, sep, pad = (_special_id(tokenizer, t) for t in ("[CLS]", "[SEP]", "[PAD]"))

    rows = []
    for enc in tokenizer.encode_batch(texts, add_special_tokens=False):
        # drop any padding a tokenizer with padding enabled may have added
        pieces = [i for i, m in zip(enc.ids, enc.attention_mask) if m]
        rows.append([cls, *pieces[:max_length - 2], sep])
    lengths = torch.tensor([len(r) for r in rows])
    order = torch.argsort(lengths, descending=True, stable=True)

    was_training = bert.training
    bert.eval()
    try:
        chunks = []
        for start in range(0, len(rows), batch_size):
            idx = order[start:start + batch_size].tolist()
            ids = torch.from_numpy(pad_batch([rows[i] for i in idx], pad)[0])
            width = ids.shape[1]
            # built from the lengths, not from ids != pad, so a [PAD] piece inside a text would still count
            keep = torch.arange(width)[None, :] < lengths[idx][:, None]
            out = bert(input_ids=ids.to(device), attention_mask=keep.long().to(device),
                       token_type_ids=torch.zeros_like(ids).to(device), output_hidden_states=True)
            chunks.append(torch.stack([mean_pool(h, keep).cpu() for h in out.hidden_states]))
    finally:
        bert.train(was_training)
    sorted_feats = torch.cat(chunks, dim=1)
    feats = torch.empty_like(sorted_feats)
    feats[:, order] = sorted_feats
    return feats


@torch.no_grad()
def word_features(model, tokenizer, sentences: list[list[str]], *, layer: int, device: str | torch.device = "cpu",
                  batch_size: int = 64, max_length: int = 128, progress: bool = False) -> list[Tensor]:
    """Per sentence, the vector of each of its given words at one layer: a list of [n_words, hidden] float32 tensors
    on the CPU, row i the mean of word i's word-piece states.

    ``sentences`` are already split into words (e.g. the lab's tokenisation), and those words are the units: each
    sentence is encoded pre-split (``tokenizer.encode_batch(..., is_pretokenized=True)``), so the tokenizer's own
    pre-tokenizer may cut a word further but every piece keeps the index of the word it came from
    (``Encoding.word_ids``), and no piece joins two words. The model reads ``[CLS] pieces[:max_length - 2] [SEP]``,
    as in `layer_features`. ``layer``: 0 is the embedding output, k the output of transformer layer k. A word with
    no piece (all of it removed by the normaliser) or whose pieces fall beyond ``max_length`` gets a row of NaN, so
    a caller can tell "no vector" from a vector. ``model`` must already live on ``device``; it runs in eval mode.
    """
    sentences = [list(s) for s in sentences]
    if not sentences:
        raise ValueError("word_features needs at least one sentence")
    bert = _checked_encoder(model, batch_size, max_length)
    depth = bert.config.num_hidden_layers
    if not 0 <= layer <= depth:
        raise ValueError(f"layer must be in 0..{depth} (0: embeddings, k: transformer layer k); got {layer}")
    cls, sep, pad = (_special_id(tokenizer, t) for t in ("[CLS]", "[SEP]", "[PAD]"))

    rows, owners = [], []  # per sentence: [CLS] pieces [SEP], and the word index of each piece (-1: none)
    for words, enc in zip(sentences, tokenizer.encode_batch(sentences, is_pretokenized=True,
                                                             add_special_tokens=False)):
        kept = [(i, w) for i, w, m in zip(enc.ids, enc.word_ids, enc.attention_mask) if m][:max_length - 2]
        rows.append([cls, *(i for i, _ in kept), sep])
        owners.append([-1, *(-1 if w is None else w for _, w in kept), -1])
    lengths = torch.tensor([len(r) for r in rows])
    order = torch.argsort(lengths, descending=True, stable=True)
    out: list[Tensor | None] = [None] * len(sentences)
    from tqdm.auto import tqdm

    was_training = bert.training
    bert.eval()
    try:
        for start in tqdm(range(0, len(rows), batch_size), disable=not progress, desc="encoding", leave=False):
            idx = order[start:start + batch_size].tolist()
            ids = torch.from_numpy(pad_batch([rows[i] for i in idx], pad)[0])
            width = ids.shape[1]
            keep = torch.arange(width)[None, :] < lengths[idx][:, None]
            states = bert(input_ids=ids.to(device), attention_mask=keep.long().to(device),
                          token_type_ids=torch.zeros_like(ids).to(device),
                          output_hidden_states=True).hidden_states[layer].float()  # [b, W, hidden]
            owner = torch.full((len(idx), width), -1, dtype=torch.long)             # [b, W] word of each piece
            for b, i in enumerate(idx):
                owner[b, :len(owners[i])] = torch.tensor(owners[i])
            for b, i in enumerate(idx):
                n = len(sentences[i])
                one_hot = (owner[b][None, :] == torch.arange(n)[:, None]).float().to(states.device)  # [n, W]
                count = one_hot.sum(dim=1, keepdim=True)                                            # [n, 1]
                vec = (one_hot @ states[b]) / count.clamp_min(1)                                    # [n, hidden]
                out[i] = vec.masked_fill(count == 0, float("nan")).cpu()
    finally:
        bert.train(was_training)
    return out


def _check_languages(train: dict[str, Tensor], test: dict[str, Tensor]) -> list[str]:
    if set(train) != set(test):
        raise ValueError(f"train and test must have the same languages; only in train: "
                         f"{sorted(set(train) - set(test))}, only in test: {sorted(set(test) - set(train))}")
    if len(train) < 2:
        raise ValueError(f"language identification needs at least 2 languages, got {sorted(train)}")
    for split, feats in (("train", train), ("test", test)):
        for lang, x in feats.items():
            if x.dim() != 2:
                raise ValueError(f"{split}[{lang!r}] must be [N, H], got shape {tuple(x.shape)}")
            if x.shape[0] == 0:
                raise ValueError(f"{split}[{lang!r}] has no rows")
    widths = {x.shape[1] for feats in (train, test) for x in feats.values()}
    if len(widths) != 1:
        raise ValueError(f"all features must have the same width H, got {sorted(widths)}")
    return sorted(train)


def _stack(feats: dict[str, Tensor], languages: list[str]) -> tuple[Tensor, Tensor]:
    x = torch.cat([feats[lang].to(torch.float32).cpu() for lang in languages])
    y = torch.cat([torch.full((feats[lang].shape[0],), k, dtype=torch.long) for k, lang in enumerate(languages)])
    return x, y


def language_id_probe(train: dict[str, Tensor], test: dict[str, Tensor], *, seed: int = 0, epochs: int = 10,
                      lr: float = 1e-3, batch_size: int = 256, device: str | torch.device = "cpu") -> dict:
    """Accuracy of a linear language-ID classifier on one layer's frozen features (Wu & Dredze 2019, §6).

    ``train`` and ``test`` map each language to its [N, H] features. Features are standardised with the mean and
    std of the whole train set (a constant feature becomes 0), 10% of the train rows (seeded) are held out, and an
    ``nn.Linear(H, n_languages)`` is trained with Adam and cross-entropy; after every epoch the learning rate is
    halved if the held-out accuracy did not improve (ReduceLROnPlateau, patience 0). The final weights are scored.
    The weights start at zero; hold-out and shuffling draw from one ``torch.Generator(seed)``, so equal seeds give
    equal results (on the same device). Class k is ``languages[k]`` (sorted language names). lr 1e-3 needs a few
    hundred steps: with little data (hundreds of rows per language) pass a smaller ``batch_size``.

    Returns {"accuracy": test accuracy over all rows, "per_language": {lang: test accuracy}, "languages": [...]}.
    """
    languages = _check_languages(train, test)
    if epochs < 1 or batch_size < 1:
        raise ValueError(f"epochs and batch_size must be >= 1, got {epochs} and {batch_size}")
    x_train, y_train = _stack(train, languages)
    x_test, y_test = _stack(test, languages)
    mean = x_train.mean(dim=0)
    std = x_train.std(dim=0, unbiased=False).clamp_min(1e-8)
    x_train, x_test = (x_train - mean) / std, (x_test - mean) / std

    gen = torch.Generator().manual_seed(seed)
    n = x_train.shape[0]
    perm = torch.randperm(n, generator=gen)
    n_val = max(1, round(0.1 * n))  # n >= 2 (two non-empty languages), so at least one row is left to fit
    val_idx, fit_idx = perm[:n_val], perm[n_val:]

    probe = nn.Linear(x_train.shape[1], len(languages))
    # Zero init: the problem is convex, so the start changes only how fast the optimum is approached. With lr 1e-3
    # and few steps, nn.Linear's random start dominated (3 well-separated clusters: 30-50% vs 92-99% accuracy).
    with torch.no_grad():
        probe.weight.zero_()
        probe.bias.zero_()
    probe.to(device)
    opt = torch.optim.Adam(probe.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="max", factor=0.5, patience=0)
    loss_fn = nn.CrossEntropyLoss()
    x_fit, y_fit = x_train[fit_idx].to(device), y_train[fit_idx].to(device)
    x_val, y_val = x_train[val_idx].to(device), y_train[val_idx].to(device)

    for _ in range(epochs):
        probe.train()
        order = torch.randperm(x_fit.shape[0], generator=gen).to(device)
        for start in range(0, x_fit.shape[0], batch_size):
            b = order[start:start + batch_size]
            opt.zero_grad()
            loss_fn(probe(x_fit[b]), y_fit[b]).backward()
            opt.step()
        probe.eval()
        with torch.no_grad():
            val_acc = (probe(x_val).argmax(1) == y_val).float().mean().item()
        sched.step(val_acc)

    with torch.no_grad():
        correct = (probe(x_test.to(device)).argmax(1).cpu() == y_test)
    per_language = {lang: correct[y_test == k].float().mean().item() for k, lang in enumerate(languages)}
    return {"accuracy": correct.float().mean().item(), "per_language": per_language, "languages": languages}


def _layer_count(feats: dict[str, Tensor], name: str) -> set[int]:
    for lang, x in feats.items():
        if x.dim() != 3:
            raise ValueError(f"{name}[{lang!r}] must be [layers + 1, N, H], got shape {tuple(x.shape)}")
    return {x.shape[0] for x in feats.values()}


def probe_layers(features_train: dict[str, Tensor], features_test: dict[str, Tensor], **kw) -> pd.DataFrame:
    """`language_id_probe` on every layer of [layers + 1, N, H] features; one row (layer, "accuracy", value) each.

    Keyword arguments go to `language_id_probe` unchanged, so every layer gets the same seed and hyper-parameters.
    """
    counts = _layer_count(features_train, "features_train") | _layer_count(features_test, "features_test")
    if len(counts) > 1:
        raise ValueError(f"all features must have the same number of layers, got {sorted(counts)}")
    _check_languages({k: v[0] for k, v in features_train.items()}, {k: v[0] for k, v in features_test.items()})
    rows = []
    for layer in range(counts.pop()):
        res = language_id_probe({k: v[layer] for k, v in features_train.items()},
                                {k: v[layer] for k, v in features_test.items()}, **kw)
        rows.append({"layer": layer, "metric": "accuracy", "value": res["accuracy"]})
    return pd.DataFrame(rows, columns=["layer", "metric", "value"])


def retrieval_by_language(features: dict[str, Tensor], source: str = "en") -> pd.DataFrame:
    """Sentence-retrieval P@1 between ``source`` and every other language, per layer.

    ``features[lang]`` is [layers + 1, N, H] for the translations of the same N sentences in the same order, so row
    i of one language is the translation of row i of any other. The value is `metrics.retrieval_precision` with the
    source as queries and the other language as targets, which **averages both directions** (source -> X and
    X -> source, cosine similarity, first index wins ties); it is therefore symmetric in the two languages.
    Returns columns language, layer, metric ("retrieval_p1"), value; languages in the order of ``features``.
    """
    if source not in features:
        raise ValueError(f"source language {source!r} is not among {sorted(features)}")
    _layer_count(features, "features")
    ref = features[source].shape
    for lang, x in features.items():
        if x.shape[1] != ref[1]:
            raise ValueError(f"{lang!r} has {x.shape[1]} sentences but {source!r} has {ref[1]}; "
                             "retrieval needs the same sentences in every language")
        if x.shape != ref:
            raise ValueError(f"{lang!r} features have shape {tuple(x.shape)}, {source!r} has {tuple(ref)}")
    rows = []
    for lang, x in features.items():
        if lang == source:
            continue
        for layer in range(ref[0]):
            p1 = retrieval_precision(queries=features[source][layer], targets=x[layer])
            rows.append({"language": lang, "layer": layer, "metric": "retrieval_p1", "value": p1})
    return pd.DataFrame(rows, columns=["language", "layer", "metric", "value"])
