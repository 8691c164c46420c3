"""Sequence packing: several documents per row, no padding, attention kept inside each document.

A batch of short documents padded to its longest one spends the encoder's work on padding. Packed, the
documents are laid side by side in rows of a fixed width W, each with its own positions (restarting at 0), and the
attention mask is block-diagonal: a piece attends only to the pieces of its own document. The fused loss
(`fused_bert.stacked_mlm_losses`) takes that mask as a boolean [M, B, 1, W, W] tensor (`document_mask`; SDPA's
memory-efficient kernel, with dropout) or as a FlexAttention `BlockMask` (`document_block_mask`; the fused
flex kernel skips the blocks outside the documents, no attention dropout). `tests/test_fast_path.py` checks that a
packed batch gives HF's loss and gradients over the same documents padded.

The bin packing (first fit over the documents in decreasing length) is a few lines; no maintained library packs
token sequences for a custom training loop (HF's `DataCollatorWithFlattening` concatenates without a width bound),
so it is written here.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Packed:
    """A packed batch of R rows of width W."""
    ids: torch.Tensor        # [R, W] word pieces; the tail of a row that no document fills holds `pad_id`
    positions: torch.Tensor  # [R, W] each piece's position inside its document (0 on the tail)
    documents: torch.Tensor  # [R, W] the document's number in the input list; -1 on the tail
    index: torch.Tensor      # [T] flat position in R*W of every document piece: document 0's pieces, then 1's, ...

    @property
    def rows(self) -> int:
        return self.ids.shape[0]


def first_fit(lengths: list[int], width: int) -> list[list[int]]:
    """Rows of document numbers: first fit in decreasing length (ties in input order); each row's sum <= width."""
    if any(n < 1 or n > width for n in lengths):
        raise ValueError(f"every document needs 1..{width} pieces to fit a row of width {width}; got "
                         f"{min(lengths)}..{max(lengths)}")
    rows: list[list[int]] = []
    free: list[int] = []
    for d in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        slot = next((r for r, f in enumerate(free) if f >= lengths[d]), None)
        if slot is None:
            rows.append([])
            free.append(width)
            slot = len(rows) - 1
        rows[slot].append(d)
        free[slot] -= lengths[d]
    return rows


def pack_documents(docs: list[torch.Tensor], width: int, pad_id: int = 0) -> Packed:
    """Pack 1-d tensors of word pieces into rows of `width` (`first_fit`)."""
    rows = first_fit([len(d) for d in docs], width)
    device = docs[0].device
    ids = torch.full((len(rows), width), pad_id, dtype=docs[0].dtype, device=device)
    positions = torch.zeros((len(rows), width), dtype=torch.long, device=device)
    documents = torch.full((len(rows), width), -1, dtype=torch.long, device=device)
    start = [0] * len(docs)
    for r, row in enumerate(rows):
        col = 0
        for d in row:
            n = len(docs[d])
            ids[r, col:col + n] = docs[d]
            positions[r, col:col + n] = torch.arange(n, device=device)
            documents[r, col:col + n] = d
            start[d] = r * width + col
            col += n
    index = torch.cat([torch.arange(start[d], start[d] + len(docs[d]), device=device) for d in range(len(docs))])
    return Packed(ids, positions, documents, index)


def document_mask(documents: torch.Tensor) -> torch.Tensor:
    """[..., W] document numbers -> [..., 1, W, W] boolean: True where query and key share a document (the tail of a
    row, -1, attends to itself only, so that no softmax row is empty; it carries no loss and no document reads it)."""
    return (documents.unsqueeze(-1) == documents.unsqueeze(-2)).unsqueeze(-3)


def document_block_mask(documents: torch.Tensor, block_size: int = 128):
    """The same mask as a FlexAttention `BlockMask` over the rows of documents [R, W] (fully masked blocks skipped)."""
    from torch.nn.attention.flex_attention import create_block_mask

    rows, width = documents.shape

    def same_document(b, h, q, kv):
        return documents[b, q] == documents[b, kv]

    return create_block_mask(same_document, rows, None, width, width, device=documents.device,
                             BLOCK_SIZE=block_size)
