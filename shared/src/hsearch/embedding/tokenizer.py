"""The :class:`~hsearch.embedding.protocol.Tokenizer` of a Hugging Face model.

Both model encoders (MiniLM through sentence-transformers, BGE-M3 through FlagEmbedding)
tokenize with a ``tokenizers.Tokenizer`` (the Rust "fast" tokenizer behind a
transformers tokenizer). :class:`HuggingFaceTokenizer` counts with a private copy of it,
so what the chunker measures is exactly what the encoder reads, while the model's own
tokenizer keeps the truncation and padding its library sets on every call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hsearch.errors import EncoderError

__all__ = ["HuggingFaceTokenizer"]


class HuggingFaceTokenizer:
    """Token counts and spans from a model's ``tokenizers.Tokenizer``.

    ``window`` is the model's limit in tokens, special tokens included (MiniLM's
    ``max_seq_length`` 256, BGE-M3's ``max_length``); :attr:`max_tokens` is what is left
    of it for the text once the special tokens the model adds are counted out.
    """

    def __init__(self, model_tokenizer: Any, *, window: int) -> None:
        """``model_tokenizer``: a transformers tokenizer backed by ``tokenizers``
        (``backend_tokenizer``) or a ``tokenizers.Tokenizer`` itself.

        Raises:
            EncoderError: It is neither, or the window leaves no room for text.
        """
        backend = getattr(model_tokenizer, "backend_tokenizer", model_tokenizer)
        if not (hasattr(backend, "to_str") and hasattr(backend, "encode_batch")):
            msg = (
                f"the model's tokenizer ({type(model_tokenizer).__name__}) is not backed by "
                "the tokenizers library; chunks cannot be measured with it"
            )
            raise EncoderError(msg)
        # A copy: transformers sets truncation and padding on its backend per call, and
        # a count must see the whole text.
        self._backend: Any = type(backend).from_str(backend.to_str())
        self._backend.no_truncation()
        self._backend.no_padding()
        special = len(self._backend.encode("", add_special_tokens=True).ids)
        if window - special < 1:
            msg = f"a window of {window} tokens leaves no room for text ({special} special tokens)"
            raise EncoderError(msg)
        self._max_tokens = window - special

    @property
    def max_tokens(self) -> int:
        return self._max_tokens

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        encoding = self._backend.encode(text, add_special_tokens=False)
        return [(int(start), int(end)) for start, end in encoding.offsets]

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        encodings = self._backend.encode_batch(list(texts), add_special_tokens=False)
        return [len(e.ids) for e in encodings]
