#!/usr/bin/env python3
"""A Python peer of the embedding benchmark (embed.py): all-MiniLM-L6-v2 sentence embeddings by
sentence-transformers (PyTorch) or by ONNX Runtime, tokenisation included.

  embed_peer.py --peer sentence_transformers|onnxruntime --model DIR --sentences FILE
                --output FILE.npy --threads N [--onnx FILE]

sentence_transformers: SentenceTransformer(DIR).encode(sentences, batch_size=B), the model's own
pipeline (it sorts a call's sentences by length and pads each batch to its longest).
onnxruntime: the model's BertModel exported with torch.onnx.export (dynamic batch and length;
written to --onnx on first use), the Hugging Face fast tokenizer of DIR padding each call to its
longest sentence, then mean pooling over the attention mask and L2 normalisation in NumPy.

Protocol as embed_peer.cpp's: embeds every sentence once in calls of 32, writes the embeddings,
replies ready, then answers `run B K W` (W untimed passes in calls of B sentences, K timed ones)
and `quit` with lines "@@race {json}" on stdout.
"""
import argparse
import json
import os
import sys
import time

import numpy as np


def reply(obj):
    sys.stdout.write("@@race " + json.dumps(obj) + "\n")
    sys.stdout.flush()


def peak_rss_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return -1


def sentence_transformers_peer(a):
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(a.model, device="cpu")
    st.eval()

    def embed(texts):
        return st.encode(texts, batch_size=len(texts), convert_to_numpy=True,
                         show_progress_bar=False)
    return embed


def export_onnx(model_dir, path):
    import torch
    from transformers import AutoModel

    class Encoder(torch.nn.Module):  # BertModel by keyword: its positional order has changed
        def __init__(self):
            super().__init__()
            self.bert = AutoModel.from_pretrained(model_dir).eval()

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=token_type_ids).last_hidden_state

    bert = Encoder().eval()
    ids = torch.ones((2, 16), dtype=torch.int64)
    mask = torch.ones((2, 16), dtype=torch.int64)
    mask[1, 9:] = 0  # traced with padding, so that the mask's path is the general one
    types = torch.zeros((2, 16), dtype=torch.int64)
    axes = {0: "batch", 1: "length"}
    torch.onnx.export(bert, (ids, mask, types), path, dynamo=False, opset_version=17,
                      input_names=["input_ids", "attention_mask", "token_type_ids"],
                      output_names=["last_hidden_state"],
                      dynamic_axes={"input_ids": axes, "attention_mask": axes,
                                    "token_type_ids": axes, "last_hidden_state": axes})


def onnxruntime_peer(a):
    import onnxruntime as ort
    from transformers import AutoTokenizer

    if not os.path.exists(a.onnx):
        export_onnx(a.model, a.onnx)
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(a.onnx, so, providers=["CPUExecutionProvider"])
    tok = AutoTokenizer.from_pretrained(a.model)

    def embed(texts):
        t = tok(texts, padding=True, truncation=True, max_length=256, return_tensors="np")
        ids, mask = t["input_ids"].astype(np.int64), t["attention_mask"].astype(np.int64)
        h = sess.run(None, {"input_ids": ids, "attention_mask": mask,
                            "token_type_ids": np.zeros_like(ids)})[0]
        m = mask[:, :, None].astype(np.float32)
        pooled = (h * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
    return embed


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peer", required=True, choices=["sentence_transformers", "onnxruntime"])
    ap.add_argument("--model", required=True)
    ap.add_argument("--sentences", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--onnx", default="minilm.onnx")
    a = ap.parse_args()
    import torch
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    with open(a.sentences, encoding="utf-8") as f:
        sentences = f.read().splitlines()
    embed = (sentence_transformers_peer if a.peer == "sentence_transformers"
             else onnxruntime_peer)(a)

    def run_pass(batch):
        return np.concatenate([embed(sentences[i:i + batch])
                               for i in range(0, len(sentences), batch)])

    with torch.inference_mode():
        np.save(a.output, run_pass(32).astype(np.float32))
        reply({"ready": True, "sentences": len(sentences), "rss_bytes": peak_rss_bytes()})
        for line in sys.stdin:
            words = line.split()
            if not words or words[0] == "quit":
                break
            batch, k, warm = (int(w) for w in words[1:4])
            for _ in range(warm):
                run_pass(batch)
            times = []
            for _ in range(k):
                t0 = time.perf_counter_ns()
                run_pass(batch)
                times.append((time.perf_counter_ns() - t0) * 1e-9)
            reply({"times": times})
    reply({"peak_rss_bytes": peak_rss_bytes()})


if __name__ == "__main__":
    main()
