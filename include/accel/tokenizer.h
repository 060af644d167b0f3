// Tokenizers built from a GGUF file's vocabulary (tokenizer.ggml.*), giving
// the ids llama.cpp gives for the same text: SentencePiece
// (tokenizer.ggml.model "llama": bigram merges by score, byte fallback) and
// byte-level BPE ("gpt2": ranked merges) with the "llama-bpe" and "qwen2"
// pre-tokenizers. docs/tokenizers.md specifies both algorithms as
// implemented. Special-token text in the input is not parsed (llama.cpp
// with parse_special off): "<s>" in a prompt is three characters of text.
//
// A tokenizer is immutable once created: any number of threads may encode
// with it and read it at once. It copies what it needs from the GGUF file,
// which may be closed afterwards. Detokenization goes through a streaming
// decoder (one per output stream) that emits only complete UTF-8.
#ifndef ACCEL_TOKENIZER_H_
#define ACCEL_TOKENIZER_H_

#include <stddef.h>
#include <stdint.h>

#include "accel/base.h"
#include "accel/gguf.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct accel_tokenizer accel_tokenizer_t;
typedef struct accel_token_decoder accel_token_decoder_t;

// The algorithm a tokenizer runs (tokenizer.ggml.model).
typedef enum accel_tokenizer_kind {
  ACCEL_TOKENIZER_KIND_SPM = 1,  // "llama": SentencePiece, byte fallback
  ACCEL_TOKENIZER_KIND_BPE = 2,  // "gpt2": byte-level BPE with merges
} accel_tokenizer_kind_t;

// Flags of accel_tokenizer_encode.
typedef uint32_t accel_tokenizer_encode_flags_t;
enum {
  ACCEL_TOKENIZER_ENCODE_NONE = 0,
  // Adds BOS in front and EOS at the end where the file says so
  // (tokenizer.ggml.add_bos_token / add_eos_token, with llama.cpp's
  // defaults when absent): the ids a model is fed for a prompt.
  ACCEL_TOKENIZER_ENCODE_ADD_SPECIAL = 1u << 0,
};

// Flags of accel_tokenizer_token_piece and accel_token_decoder_create.
typedef uint32_t accel_tokenizer_piece_flags_t;
enum {
  ACCEL_TOKENIZER_PIECE_NONE = 0,
  // Renders control and unknown tokens as their text ("<s>", "<|im_end|>");
  // without it they render as nothing, as llama.cpp's token_to_piece with
  // special off.
  ACCEL_TOKENIZER_PIECE_SPECIAL = 1u << 0,
  // Decoder only: keeps the space that a SentencePiece vocabulary with
  // add_space_prefix puts in front of the first word. Without it the
  // decoder drops the leading space of the first token that renders any
  // bytes when that token is a normal one, as SentencePiece's own decoder
  // does, so that decode(encode(x)) == x.
  ACCEL_TOKENIZER_PIECE_KEEP_SPACE_PREFIX = 1u << 1,
};

// Builds the tokenizer of the vocabulary in |gguf|: tokenizer.ggml.model
// ("llama" or "gpt2"), tokens, scores ("llama": required, one float per
// token), token_type (optional), merges ("gpt2": required, "A B" strings
// naming two tokens), pre ("gpt2": "llama-bpe" or "qwen2"), the special
// token ids and the add_bos_token / add_eos_token / add_space_prefix flags.
// Loads in time linear in the vocabulary and merges (hash tables built
// once). |gguf| is only read during the call; |*out| is the caller's, freed
// with accel_tokenizer_destroy.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument.
// ACCEL_ERROR_NOT_FOUND: no tokenizer.ggml.model or tokenizer.ggml.tokens.
// ACCEL_ERROR_UNSUPPORTED: another model or pre-tokenizer (named).
// ACCEL_ERROR_FORMAT: a malformed vocabulary: an array of the wrong type or
//   length, missing scores or merges, a merge without a space or naming an
//   unknown token, a special token id out of range (the message names the
//   key, the index and the value).
// ACCEL_ERROR_OUT_OF_MEMORY: host allocation failed.
// Thread-safe (|gguf| is only read).
ACCEL_API accel_status_t accel_tokenizer_create_from_gguf(
    const accel_gguf_t *gguf, accel_tokenizer_t **out);

// Frees |tokenizer|. NULL is ignored. Not to be called while another thread
// uses |tokenizer| or a decoder made from it.
ACCEL_API void accel_tokenizer_destroy(accel_tokenizer_t *tokenizer);

// The tokenizer's algorithm, its number of tokens, and its BOS and EOS ids
// (-1 where the vocabulary has none). They cannot fail; a NULL |tokenizer|
// gives 0 (kind and size) or -1 (ids).
// Thread-safe.
ACCEL_API accel_tokenizer_kind_t accel_tokenizer_kind(
    const accel_tokenizer_t *tokenizer);
ACCEL_API uint32_t accel_tokenizer_vocab_size(
    const accel_tokenizer_t *tokenizer);
ACCEL_API int32_t accel_tokenizer_bos(const accel_tokenizer_t *tokenizer);
ACCEL_API int32_t accel_tokenizer_eos(const accel_tokenizer_t *tokenizer);

// Encodes the |size| bytes of |text| (any bytes: invalid UTF-8 is encoded
// as llama.cpp does, by byte fallback for SentencePiece and as U+FFFD for
// BPE) into token ids. Sets |*out_count| to the number of ids the text
// needs and, when it is at most |capacity|, writes them to |ids|. |ids| may
// be NULL when |capacity| is 0 (a size query, which returns ACCEL_OK).
// Time near-linear in |size| (merges through a priority queue).
// ACCEL_ERROR_INVALID_ARGUMENT: NULL |tokenizer| or |out_count|, NULL
//   |text| with a non-zero |size|, NULL |ids| with a non-zero |capacity|,
//   or unknown |flags| bits.
// ACCEL_ERROR_OUT_OF_MEMORY: |capacity| is non-zero and below the count
//   (|*out_count| is set, |ids| untouched), or host allocation failed.
// ACCEL_ERROR_UNSUPPORTED: ADD_SPECIAL on a vocabulary whose flags ask for
//   a BOS or EOS it does not have, or (SentencePiece) a byte that needs
//   byte fallback in a vocabulary with neither its <0xXX> token nor an
//   unknown token.
// Thread-safe.
ACCEL_API accel_status_t accel_tokenizer_encode(
    const accel_tokenizer_t *tokenizer, const char *text, size_t size,
    accel_tokenizer_encode_flags_t flags, int32_t *ids, size_t capacity,
    size_t *out_count);

// Writes the bytes token |id| stands for (its piece) to |buffer| and their
// number to |*out_size|: SentencePiece pieces with U+2581 as space and
// byte tokens as their byte; BPE pieces mapped back from the byte-level
// alphabet; user-defined tokens as their text; control and unknown tokens
// as their text with ACCEL_TOKENIZER_PIECE_SPECIAL, else nothing. A piece
// may be part of a UTF-8 character (use a decoder to join them). |buffer|
// may be NULL when |capacity| is 0 (a size query).
// ACCEL_ERROR_INVALID_ARGUMENT: NULL |tokenizer| or |out_size|, |id| not a
//   token of the vocabulary, NULL |buffer| with a non-zero |capacity|, or
//   unknown |flags| bits (KEEP_SPACE_PREFIX is for decoders).
// ACCEL_ERROR_OUT_OF_MEMORY: |capacity| is non-zero and below the piece's
//   size (|*out_size| is set, |buffer| untouched).
// Thread-safe.
ACCEL_API accel_status_t accel_tokenizer_token_piece(
    const accel_tokenizer_t *tokenizer, int32_t id,
    accel_tokenizer_piece_flags_t flags, char *buffer, size_t capacity,
    size_t *out_size);

// Creates a streaming decoder over |tokenizer| with piece |flags|. The
// decoder borrows |tokenizer|, which must outlive it; |*out| is the
// caller's, freed with accel_token_decoder_destroy.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument or unknown |flags| bits.
// ACCEL_ERROR_OUT_OF_MEMORY: host allocation failed.
// Thread-safe.
ACCEL_API accel_status_t accel_token_decoder_create(
    const accel_tokenizer_t *tokenizer, accel_tokenizer_piece_flags_t flags,
    accel_token_decoder_t **out);

// Frees |decoder| (bytes it held are dropped). NULL is ignored.
// Not thread-safe with other calls on the same |decoder|.
ACCEL_API void accel_token_decoder_destroy(accel_token_decoder_t *decoder);

// Appends token |id|'s piece to the stream and returns the text that is now
// complete: |*out_text| and |*out_size| (possibly 0) name bytes the decoder
// owns, valid until the next call on |decoder|. The text is always valid
// UTF-8: bytes that may still begin a character are held until a later
// token completes them; bytes that can no longer form one (a stray
// continuation byte, an overlong form, a surrogate) come out as U+FFFD, one
// per maximal invalid subsequence.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument or |id| not a token of the
//   vocabulary (the stream is unchanged).
// ACCEL_ERROR_OUT_OF_MEMORY: host allocation failed (the stream is
//   unchanged).
// Thread-compatible: calls on the same |decoder| must be serialized.
ACCEL_API accel_status_t accel_token_decoder_push(
    accel_token_decoder_t *decoder, int32_t id, const char **out_text,
    size_t *out_size);

// Ends the stream: returns held bytes that never completed a character as
// one U+FFFD (or nothing) in |*out_text| and |*out_size| as push does, and
// resets |decoder| for a new stream (the leading-space rule applies again).
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument.
// Thread-compatible: calls on the same |decoder| must be serialized.
ACCEL_API accel_status_t accel_token_decoder_flush(
    accel_token_decoder_t *decoder, const char **out_text, size_t *out_size);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // ACCEL_TOKENIZER_H_
