"""One Hugging Face model trained alone, behind the stack's step interface, for models a `ModelStack` cannot hold.

The stack trains `BertForMaskedLM` shapes only; a model with another head (e.g. `BertForPreTraining`'s next-sentence
head) trains here instead, on the same loop (`pretrain.pretrain_loop`) and checkpoint format (`checkpoint.py`):

    single = SingleModel(model, loss, lr=1e-4, weight_decay=0.01, eps=1e-6, warmup_steps=10, total_steps=100,
                         max_grad_norm=1.0, device=device)
    pretrain_loop(single, batch, steps=100, checkpoint=path)

`loss(model, *inputs)` returns the scalar loss of one step; `batch(step)` gives `make_inputs` as for a stack. The
step is eager (no CUDA graphs, no compiling): HF's model under bf16 autocast on a GPU, as the stacks train, with
PyTorch's AdamW, HF's linear warm-up and decay (`stacked.linear_schedule` as a `LambdaLR`) and
`clip_grad_norm_`.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from .stacked import linear_schedule


class SingleModel:
    """A model, its AdamW optimizer and learning-rate schedule; `step` is one optimizer step (see the module)."""

    size = 1
    data_parallel = False

    def __init__(self, model: nn.Module, loss: Callable[..., torch.Tensor], *, lr: float, weight_decay: float,
                 eps: float, warmup_steps: int, total_steps: int, max_grad_norm: float, device: torch.device | str,
                 bf16: bool | None = None):
        if total_steps < 1 or warmup_steps < 0 or max_grad_norm <= 0:
            raise ValueError(f"need total_steps >= 1, warmup_steps >= 0 and max_grad_norm > 0; got {total_steps}, "
                             f"{warmup_steps}, {max_grad_norm}")
        self.device = torch.device(device)
        self.model = model.to(self.device)
        self.loss = loss
        self.bf16 = self.device.type == "cuda" if bf16 is None else bf16
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay, eps=eps)
        self.schedule = torch.optim.lr_scheduler.LambdaLR(self.optimizer, linear_schedule(warmup_steps, total_steps))
        self.max_grad_norm = max_grad_norm
        self.step_count = 0
        self.fallbacks: list[dict] = []  # never compiled: no compiled step can fail (kept for the loop's records)

    def step(self, make_inputs, graph_key=None) -> torch.Tensor:
        """Forward, backward, clipping, AdamW and the schedule's step. Returns the loss as a [1] tensor."""
        inputs = make_inputs()
        self.model.train()
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16):
            loss = self.loss(self.model, *inputs)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
        self.optimizer.step()
        self.schedule.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step_count += 1
        return loss.detach()[None]

    def state_dict(self) -> dict:
        return {"model": self.model.state_dict(), "opt": self.optimizer.state_dict(),
                "sched": self.schedule.state_dict(), "step": self.step_count}

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["opt"])
        self.schedule.load_state_dict(state["sched"])
        self.step_count = state["step"]
