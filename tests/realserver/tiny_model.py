"""A tiny llama GGUF model for the real-server tests: a byte vocabulary, a ChatML template, random weights.

Its output is made predictable, never meaningful: attention and the feed-forward layer write almost
nothing into the residual stream (tiny random output projections), so the next token depends on the
current one alone, through three classes of token embeddings and an output head that reads them:
after a letter comes `"`, after anything else comes `x`, and where those are not allowed (a grammar
constrains the reply) `7` is preferred. Free text is `x"x"x…` (never blank, always UTF-8); a JSON
string under a grammar is `"x"`; a score chosen from 0..10 is 7.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

N_EMBD = 32
N_HEAD = 2
N_FF = 64
N_LAYER = 1
SPECIALS = ("<s>", "</s>", "<|im_start|>", "<|im_end|>")
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] or '' }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# A byte-level BPE needs at least one merge in the file; this one joins two spaces.
MERGE = ("Ġ Ġ", "ĠĠ")


def byte_symbols() -> list[str]:
    """GPT-2's printable stand-in character for each byte 0..255 (the byte-level BPE vocabulary)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    symbols: dict[int, str] = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in symbols:
            symbols[b] = chr(256 + extra)
            extra += 1
    return [symbols[b] for b in range(256)]


def _weights(n_vocab: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)

    def noise(*shape: int, scale: float) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    quote, letters = ord('"'), range(ord("a"), ord("z") + 1)
    # Dimensions 0-2 mark a token's class (quote, letter, other); dimension 3 is always on.
    token_class = np.full(n_vocab, 2)
    token_class[quote] = 0
    token_class[list(letters)] = 1
    embed = noise(n_vocab, N_EMBD, scale=0.1)
    embed[:, :4] = 0.0
    embed[np.arange(n_vocab), token_class] = 4.0
    embed[:, 3] = 4.0
    # The head reads the normalised embedding (class dims ≈ 5.5): logit = preference + 4 × (successor?).
    unit = 1.0 / 5.5
    head = noise(n_vocab, N_EMBD, scale=0.01)
    head[:, :4] = 0.0
    head[quote, 3], head[ord("x"), 3], head[ord("7"), 3] = 2.0 * unit, 1.0 * unit, 0.5 * unit
    head[quote, 1] = 4.0 * unit  # after a letter: "
    head[ord("x"), 0] = head[ord("x"), 2] = 4.0 * unit  # after " or anything else: x
    head[n_vocab - 4:, 3] = -2.0 * unit  # specials last: never chosen unless a grammar ends
    tensors = {"token_embd.weight": embed, "output_norm.weight": np.ones(N_EMBD, np.float32),
               "output.weight": head}
    for layer in range(N_LAYER):
        block = f"blk.{layer}."
        tensors |= {
            block + "attn_norm.weight": np.ones(N_EMBD, np.float32),
            block + "attn_q.weight": noise(N_EMBD, N_EMBD, scale=0.2),
            block + "attn_k.weight": noise(N_EMBD, N_EMBD, scale=0.2),
            block + "attn_v.weight": noise(N_EMBD, N_EMBD, scale=0.2),
            block + "attn_output.weight": noise(N_EMBD, N_EMBD, scale=0.001),
            block + "ffn_norm.weight": np.ones(N_EMBD, np.float32),
            block + "ffn_gate.weight": noise(N_FF, N_EMBD, scale=0.2),
            block + "ffn_up.weight": noise(N_FF, N_EMBD, scale=0.2),
            block + "ffn_down.weight": noise(N_EMBD, N_FF, scale=0.001),
        }
    return tensors


def write_model(path: Path, n_ctx: int, seed: int = 51) -> Path:
    """Write the model to `path` (a .gguf file) and return it."""
    import gguf

    tokens = [*byte_symbols(), MERGE[1], *SPECIALS]
    types = [gguf.TokenType.NORMAL] * (len(tokens) - len(SPECIALS)) + [gguf.TokenType.CONTROL] * len(SPECIALS)
    specials = {name: tokens.index(name) for name in SPECIALS}
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("clawstore tiny test model")
    writer.add_context_length(n_ctx)
    writer.add_embedding_length(N_EMBD)
    writer.add_feed_forward_length(N_FF)
    writer.add_block_count(N_LAYER)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD)
    writer.add_rope_dimension_count(N_EMBD // N_HEAD)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges([MERGE[0]])
    writer.add_bos_token_id(specials["<s>"])
    writer.add_eos_token_id(specials["<|im_end|>"])
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)
    for name, tensor in _weights(len(tokens), seed).items():
        writer.add_tensor(name, tensor)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
