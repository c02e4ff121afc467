"""A pretrained encoder checkpoint (a hub name, a local folder in HF or sentence-transformers layout, or
a Python package that ships one) turned into the project's own model folder (models.TwoTower), so that
the encode, index, search and evaluate stages serve it as they serve a model trained here.

The checkpoint is not trained: one shared tower, the pooling and normalisation its sentence-transformers
config names (modules.json, 1_Pooling/config.json), its max_seq_length and lower-casing
(sentence_bert_config.json) and its query/document prompts (config_sentence_transformers.json); each
can be overridden. A plain HF folder has no such config: [CLS] pooling, no normalisation and the
tokenizer's length are the defaults there, and every setting records where it came from."""
from __future__ import annotations

import importlib
import json
from importlib.util import find_spec
from pathlib import Path

from ..io import StageError

POOLINGS = ("cls", "mean")
# what config_sentence_transformers.json calls the document side's prompt, in the order looked for
DOC_PROMPTS = ("document", "passage", "corpus", "doc")


def resolve(source: str) -> Path:
    """The folder of a checkpoint: `package:<module>` (a package that ships a model folder, found where the
    package is installed: its get_model_path(), else its model/ folder), a local folder, or a hub name
    (snapshot_download: the local cache offline)."""
    if source.startswith("package:"):
        name = source.partition(":")[2]
        if not name or find_spec(name) is None:
            raise StageError(source, f"Python package {name!r} is not installed (see requirements.txt)")
        module = importlib.import_module(name)
        folder = Path(module.get_model_path()) if hasattr(module, "get_model_path") else \
            Path(module.__file__).resolve().parent / "model"
        if not (folder / "config.json").is_file():
            raise StageError(source, f"the package has no model folder with config.json ({folder})")
        return folder
    path = Path(source)
    if path.exists():
        if not (path / "config.json").is_file():
            raise StageError(path, "not a checkpoint folder (no config.json: neither HF nor sentence-transformers layout)")
        return path
    if source.startswith((".", "/")) or source.count("/") > 1:
        raise StageError(source, "no such folder")
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo_id=source))
    except Exception as err:   # offline, unknown repo, gated: all one line
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise StageError(source, f"neither a local folder nor a hub checkpoint that can be fetched ({first})") from None


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise StageError(path, f"not valid JSON ({err.msg} at line {err.lineno})") from None


def _pooling_mode(config: dict) -> str:
    """The pooling a sentence-transformers Pooling config names (old boolean keys or the newer pooling_mode);
    convert() refuses one it cannot do unless params override it."""
    if isinstance(config.get("pooling_mode"), str):
        return config["pooling_mode"]
    modes = [key[len("pooling_mode_"):].removesuffix("_token").removesuffix("_tokens")
             for key, on in config.items() if key.startswith("pooling_mode_") and on is True]
    return "+".join(modes) or "none"


def read_settings(folder: Path) -> tuple[Path, dict]:
    """(the transformer's folder, {setting: (value, where it came from)}) of a checkpoint folder."""
    settings: dict[str, tuple] = {}
    modules_path = folder / "modules.json"
    if not modules_path.is_file():   # a plain HF checkpoint
        return folder, settings
    transformer = folder
    modules = _read(modules_path)
    for module in modules:
        kind = str(module.get("type", "")).rsplit(".", 1)[-1]
        where = folder / module.get("path", "")
        if kind == "Transformer":
            transformer = where
        elif kind == "Pooling":
            pooling_config = _read(where / "config.json")
            settings["pooling"] = (_pooling_mode(pooling_config), f"{where.name}/config.json")
            if pooling_config.get("include_prompt") is False:
                raise StageError(where / "config.json", "pooling that leaves the prompt's tokens out is not supported")
        elif kind == "Normalize":
            settings["normalize"] = (True, "modules.json")
        else:
            raise StageError(modules_path, f"module {module.get('type')} is not supported "
                                           "(Transformer, Pooling and Normalize are)")
    settings.setdefault("normalize", (False, "modules.json (no Normalize module)"))
    bert_config = transformer / "sentence_bert_config.json"
    if bert_config.is_file():
        config = _read(bert_config)
        if config.get("max_seq_length"):
            settings["max_length"] = (int(config["max_seq_length"]), bert_config.name)
        settings["lowercase"] = (bool(config.get("do_lower_case", False)), bert_config.name)
    st_config = folder / "config_sentence_transformers.json"
    if st_config.is_file():
        config = _read(st_config)
        prompts = config.get("prompts") or {}
        settings["query_prefix"] = (prompts.get("query", ""), st_config.name)
        settings["doc_prefix"] = (next((prompts[k] for k in DOC_PROMPTS if k in prompts), ""), st_config.name)
        if config.get("similarity_fn_name") not in (None, "cosine", "dot"):
            raise StageError(st_config, f"similarity {config['similarity_fn_name']!r} is not supported (cosine, dot)")
    return transformer, settings


def usable_length(tokenizer, encoder) -> int:
    """The longest input the encoder takes: its positions, and the tokenizer's limit when it names a real one."""
    positions = getattr(encoder.config, "max_position_embeddings", 512)
    limit = getattr(tokenizer, "model_max_length", positions)
    return min(positions, limit) if limit and limit < 100_000 else positions


def convert(source: str, out, doc_text: str, overrides: dict, label: str = "", caveat: str = "") -> dict:
    """Write `source` as a TwoTower model folder at `out`; returns the settings and where each came from.

    overrides: pooling, normalize, query_length, doc_length, query_prefix, doc_prefix, lowercase (None or
    absent = the checkpoint's own)."""
    from transformers import AutoModel, AutoTokenizer

    from .models import Tower, TwoTower

    folder = resolve(source)
    transformer, found = read_settings(folder)
    try:
        encoder = AutoModel.from_pretrained(transformer)
        tokenizer = AutoTokenizer.from_pretrained(transformer)
    except (OSError, ValueError) as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise StageError(transformer, f"cannot load the checkpoint ({first})") from None
    longest = usable_length(tokenizer, encoder)
    defaults = {"pooling": ("cls", "default (no sentence-transformers config)"),
                "normalize": (False, "default (no sentence-transformers config)"),
                "max_length": (longest, "the encoder's positions / tokenizer limit"),
                "lowercase": (False, "default (the tokenizer's own casing)"),
                "query_prefix": ("", "default (none)"), "doc_prefix": ("", "default (none)")}
    chosen = {**defaults, **found}
    chosen["query_length"] = chosen["doc_length"] = chosen.pop("max_length")
    for key, value in overrides.items():
        if value is not None:
            chosen[key] = (value, "params")
    if chosen["pooling"][0] not in POOLINGS:
        where = "--pooling" if chosen["pooling"][1] == "params" else folder / chosen["pooling"][1]
        raise StageError(where, f"pooling {chosen['pooling'][0]} is not supported (only {' or '.join(POOLINGS)});"
                                " set the checkpoint's pooling in params to override it")
    for key in ("query_length", "doc_length"):
        if not 1 <= int(chosen[key][0]) <= longest:
            raise StageError(f"--{key.replace('_', '-')}", f"must be within 1..{longest} (the encoder's limit), "
                                                           f"not {chosen[key][0]}")
    values = {key: value for key, (value, _) in chosen.items()}
    config = {"pooling": values["pooling"], "embedding_dim": 0, "shared": True, "normalize": bool(values["normalize"]),
              "query_length": int(values["query_length"]), "doc_length": int(values["doc_length"]),
              "doc_text": doc_text, "head": "linear", "query_prefix": values["query_prefix"],
              "doc_prefix": values["doc_prefix"], "lowercase": bool(values["lowercase"]),
              "checkpoint": {"source": source, "folder": str(folder), "label": label, "caveat": caveat,
                             "read_from": {key: where for key, (_, where) in chosen.items()}}}
    tower = Tower(encoder, config["pooling"], None, config["normalize"])
    TwoTower(tower, None, config).save(out, tokenizer)
    return config
