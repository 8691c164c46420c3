"""The training engine: the loops, the stack planner, the checkpoint format and the kernels, in one folder.

A paper's folder is a recipe (which models, which data, which evaluation); this folder trains. To follow one
pre-training step from a recipe down to the kernels, read in this order:

    pretrain.py     the pre-training loop (`pretrain_loop`): steps, time limit, checkpoint/resume, progress bar,
                    loss curve, evaluation points; the recipe passes its batches and hooks. `train_sampled_mlm`
                    (language-sampled masked LM of one model) is the first recipe on it.
    finetune.py     the fine-tuning loop (`finetune_loop`) of one encoder with a pluggable task head, and the
                    recipe's optimiser and schedule (`FinetuneConfig`)
    single.py       `SingleModel`: one HF model with another head (e.g. next-sentence prediction) trained alone
                    behind the stack's step interface, on the same loop and checkpoint
    planner.py      how many models share a stack and whether it compiles, by model size and GPU memory
    checkpoint.py   the one checkpoint format (stack state, optimizer, step, elapsed, losses, RNG), atomic
    stacked.py      `ModelStack`: M models of one shape trained together; one `step` = forward, backward,
                    per-model clipping, AdamW, optionally captured as a CUDA graph (`CudaGraphs`); the engine
                    ("hf" or "fused") is named when a recipe builds a stack (`pretrain.new_stack`)
    fused_bert.py   the stacked BERT forward with an explicit model dimension ([M, B, W, H]), eager or compiled
    noise.py        each model's own random numbers (dropout, masking), the same in any stack
    masking.py      BERT's MLM masking (80/10/10, optionally knn-replace) on a stack's batch
    packing.py      several documents packed into one row, with a block-diagonal attention mask
    distributed.py  torchrun's process group: rank, world size, gradient averaging (data parallelism)
    queue.py        the work queue over torchrun's store: one rank per GPU, on one machine or several, takes the
                    next job (a stack, a fine-tuning) with an atomic counter; done jobs are skipped, so a rerun resumes
    models.py       HF `BertForMaskedLM` (or `BertForPreTraining`, with NSP) built from a `ModelSize` (`init_model`,
                    `bert_config`)

Nothing here names a paper; paper-specific inputs (masking variants, position offsets, vocabulary shifts) enter
through the recipe's batch function (`pretrain_loop(batch=...)`), which the paper owns.
"""
