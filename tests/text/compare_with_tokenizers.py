#!/usr/bin/env python3
"""Holds fusedsl's WordPiece tokenizer against Hugging Face tokenizers (the Python bindings of the
Rust library that transformers and sentence-transformers run), loaded from the model's
tokenizer.json:

  1. every Unicode scalar value c: the words of "a" c "b" after BertNormalizer and
     BertPreTokenizer, and its token ids, from fusedsl's codepoint_words tool and from tokenizers;
  2. the committed reference sentences (data/minilm_wordpiece_reference.jsonl): tokenizers still
     gives them the committed ids.

    compare_with_tokenizers.py CODEPOINT_WORDS_BINARY REFERENCE_JSONL

with the model directory in FUSEDSL_MINILM_DIR (scripts/with-model-files minilm sets it).

Exits 0 when everything agrees, 1 on the first differences (up to 20 listed), and 77 (skipped)
when the tokenizers package is missing, except under CI=true, where that is a failure.
"""
import json
import os
import subprocess
import sys


def main():
    try:
        import tokenizers
        from tokenizers import Tokenizer
    except ImportError:
        print("tokenizers is not installed (scripts/setup-model-venv installs it)")
        sys.exit(1 if os.environ.get("CI") == "true" else 77)
    binary, reference = sys.argv[1:3]
    model_dir = os.environ["FUSEDSL_MINILM_DIR"]
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    norm, pre = tok.normalizer, tok.pre_tokenizer

    ours = subprocess.run([binary, model_dir], check=True, capture_output=True).stdout.decode("utf-8")
    lines = ours.split("\n")[:-1]
    cps = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
    if len(lines) != len(cps):
        sys.exit(f"codepoint_words printed {len(lines)} lines for {len(cps)} code points")
    texts = ["a" + chr(cp) + "b" for cp in cps]
    encodings = tok.encode_batch(texts, add_special_tokens=False)
    bad = []
    for cp, text, line, enc in zip(cps, texts, lines, encodings):
        hexcp, words, ids = line.split("\t")
        want_words = "\x1f".join(w for w, _ in pre.pre_tokenize_str(norm.normalize_str(text)))
        want_ids = " ".join(map(str, enc.ids))
        if int(hexcp, 16) != cp or words != want_words or ids != want_ids:
            bad.append(f"U+{cp:04X}: fusedsl {words!r} [{ids}], tokenizers {want_words!r} [{want_ids}]")
    print(f"tokenizers {tokenizers.__version__}: {len(cps) - len(bad)} of {len(cps)} code points agree")

    with open(reference, encoding="utf-8") as f:
        header = json.loads(f.readline())
        tok.enable_truncation(header["max_length"])
        n = 0
        for i, line in enumerate(f):
            rec = json.loads(line)
            text = bytes.fromhex(rec["hex"]).decode("utf-8", "replace") if "hex" in rec else rec["text"]
            if tok.encode(text).ids != rec["ids"]:
                bad.append(f"reference sentence {i} ({rec['group']}): tokenizers gives other ids now")
            n += 1
    print(f"{n} reference sentences checked against tokenizers")
    for b in bad[:20]:
        print(b)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
