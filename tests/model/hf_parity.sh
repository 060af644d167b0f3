#!/bin/sh
# Sets up a virtual environment with Hugging Face `tokenizers`,
# `sentencepiece` and `gguf`
# (from PyPI, once, in VENV) and the real vocabularies (fetch-vocab.sh), then
# runs hf_parity.py. Exits 77 (skipped) with the reason when either cannot
# be had.
#
#   tests/model/hf_parity.sh VENV VOCAB_DIR LIBACCEL [TEXTS]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
venv=$1
vocab=$2
lib=$3
texts=${4:-1000}
"$here/fetch-vocab.sh" "$vocab" || exit 77
if [ ! -x "$venv/bin/python" ] || \
    ! "$venv/bin/python" -c "import tokenizers, sentencepiece, gguf" \
      2>/dev/null; then
  if ! python3 -m venv "$venv" >/dev/null 2>&1 || \
      ! timeout 600 "$venv/bin/python" -m pip install --quiet \
        tokenizers sentencepiece protobuf gguf numpy >"$venv.log" 2>&1; then
    echo "hf_parity: cannot install the reference tokenizers into $venv" \
      "(offline?): see $venv.log" >&2
    exit 77
  fi
fi
exec "$venv/bin/python" "$here/hf_parity.py" "$lib" "$vocab" "$texts"
