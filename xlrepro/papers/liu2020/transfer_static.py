"""Zero-shot transfer through static embeddings (Liu et al. 2020 L §3.1.2): the embeddings stay frozen; a BiLSTM
reads each verse, its states are max-pooled over the pieces into u and v, and an MLP classifies
[u; v; |u − v|; u ⊙ v] (the sentence-pair encoder of Conneau et al. 2017, which the paper's XNLI setup follows).
Trained on the English train pairs of the lab's section task, tested on every language's test pairs.

Inputs are mBERT WordPiece tokens, as the embeddings were trained on; a token without a vector (rarer than the run's
min_count) maps to a zero row. PyTorch's LSTM is the library part; the pooling and the pair features are these few
lines.
"""
from __future__ import annotations

import time

import numpy as np
import torch
from torch import nn


def pair_features(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """[u; v; |u − v|; u ⊙ v]: u, v [B, D] -> [B, 4D]."""
    return torch.cat([u, v, (u - v).abs(), u * v], dim=-1)


class StaticPairClassifier(nn.Module):
    def __init__(self, vectors: np.ndarray, hidden: int, n_labels: int):
        """vectors [V, D] (row 0 is the padding / unknown row and should be zeros)."""
        super().__init__()
        self.emb = nn.Embedding.from_pretrained(torch.as_tensor(vectors, dtype=torch.float32), freeze=True,
                                                padding_idx=0)
        self.lstm = nn.LSTM(vectors.shape[1], hidden, batch_first=True, bidirectional=True)
        self.mlp = nn.Sequential(nn.Linear(8 * hidden, hidden), nn.Tanh(), nn.Linear(hidden, n_labels))

    def encode(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """ids [B, W] (0 = padding), lengths [B] >= 1 -> [B, 2 * hidden], max over the real positions."""
        packed = nn.utils.rnn.pack_padded_sequence(self.emb(ids), lengths.cpu(), batch_first=True,
                                                   enforce_sorted=False)
        states, _ = nn.utils.rnn.pad_packed_sequence(self.lstm(packed)[0], batch_first=True,
                                                     total_length=ids.shape[1])  # [B, W, 2h]
        pad = torch.arange(ids.shape[1], device=ids.device)[None, :] >= lengths[:, None]
        return states.masked_fill(pad[..., None], float("-inf")).amax(1)

    def forward(self, a, la, b, lb):
        return self.mlp(pair_features(self.encode(a, la), self.encode(b, lb)))


def encode_verses(tok, index: dict, texts, max_tokens: int):
    """(ids [N, W] with 0 padding, lengths [N]) of WordPiece tokens mapped through `index` (unknown -> 0)."""
    enc = [[index.get(t, 0) for t in e.tokens[:max_tokens]] or [0]
           for e in tok.encode_batch(list(texts), add_special_tokens=False)]
    W = max(map(len, enc))
    ids = np.zeros((len(enc), W), np.int64)
    for i, e in enumerate(enc):
        ids[i, :len(e)] = e
    return torch.from_numpy(ids), torch.tensor([len(e) for e in enc])


def train_static_classifier(emb, data, seed: int, device="cpu") -> dict:
    """Train on data's English train pairs, return {"accuracy": {lang: test accuracy}, "seconds", ...}."""
    from xlrepro.tasks.sections import SECTIONS

    t = data.setup.plan.transfer
    device = torch.device(device)
    index = {tok: i + 1 for i, tok in enumerate(emb.tokens)}
    vectors = np.concatenate([np.zeros((1, emb.vectors.shape[1]), np.float32), emb.vectors])

    def tensors(lang, split):
        p = data.pairs(lang, split)
        a = encode_verses(data.tok, index, p["first"], t.max_tokens)
        b = encode_verses(data.tok, index, p["second"], t.max_tokens)
        return a, b, torch.tensor(p["label"].to_numpy())

    torch.manual_seed(seed)
    model = StaticPairClassifier(vectors, t.lstm_hidden, len(SECTIONS)).to(device)
    optim = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=t.lr)
    (a, la), (b, lb), y = tensors("en", "train")
    gen = torch.Generator().manual_seed(seed)
    t0 = time.time()
    losses = []
    for _ in range(t.epochs):
        model.train()
        order = torch.randperm(len(y), generator=gen)
        total = 0.0
        for k in range(0, len(order), t.batch_size):
            r = order[k:k + t.batch_size]
            loss = nn.functional.cross_entropy(model(a[r].to(device), la[r].to(device), b[r].to(device),
                                                     lb[r].to(device)), y[r].to(device))
            optim.zero_grad()
            loss.backward()
            optim.step()
            total += loss.item() * len(r)
        losses.append(total / len(y))
    model.eval()
    acc = {}
    with torch.no_grad():
        for lang in data.setup.languages:
            (a, la), (b, lb), y = tensors(lang, "test")
            pred = torch.cat([model(a[k:k + 256].to(device), la[k:k + 256].to(device), b[k:k + 256].to(device),
                                    lb[k:k + 256].to(device)).argmax(-1).cpu() for k in range(0, len(y), 256)])
            acc[lang] = float((pred == y).float().mean())
    covered = float(np.mean([index.get(x, 0) > 0 for x in data.tok.encode(" ".join(data.pairs("en", "train")["first"][:200]), add_special_tokens=False).tokens]))
    return {"accuracy": acc, "losses": losses, "seconds": time.time() - t0, "en_train_token_coverage": covered,
            "train_pairs": int(len(data.pairs("en", "train")))}
