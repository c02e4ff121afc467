"""YAML files the project reads (params, profiles, claims, schemas) and config values, within bounds: a file's size,
its nesting, keys given twice, and the values its aliases expand to ("billion laughs") are checked before anything
builds the document or a message from it; every problem is one line, every quoted value cut short (`bounded`)."""
from __future__ import annotations

import functools
import itertools
import os
import re
from pathlib import Path

import yaml

PAPERS_FILE = "data/papers/papers.yaml"   # the papers and their tables (towers.reports.papers reads it)


class ParamsError(Exception):
    """One line: `<file>: <key path>: <problem>`."""


def dotted(path) -> str:
    """('datasets', 'squad', 'files', 0, 'url') -> 'datasets.squad.files[0].url'."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def _shown(path) -> str:
    """A path as the user would write it: relative to the working directory when inside it."""
    relative = os.path.relpath(path)
    return str(path) if relative.startswith("..") else relative


# Bounds of a YAML file the project reads (params, profiles, claims) and of --config values: real ones are a few
# KB, a few levels deep. Aliases are counted at their expanded size, so a few KB of nested aliases ("billion
# laughs") is refused before anything expands it (a schema message, a deep copy).
MAX_YAML_BYTES = 4 << 20
MAX_YAML_DEPTH = 64
MAX_YAML_NODES = 100_000
SHOWN = 300   # characters of a quoted value in a one-line message


def bounded(text, limit: int = SHOWN) -> str:
    """One line of at most about `limit` characters (control characters shown escaped). Only the words shown
    are joined (limit // 2 + 2 words are over limit + 1 characters): the text may be megabytes."""
    text = " ".join(m.group() for m in itertools.islice(re.finditer(r"\S+", str(text)), limit // 2 + 2))[:limit + 1]
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return text if len(text) <= limit else text[:limit] + "..."


def _key_path(path) -> str:
    return bounded(dotted(path), 120) if path else "(top level)"


def _expansion_problem(root, entries, line=lambda node: "") -> tuple[list, str] | None:
    """(key path, problem) for nesting deeper than MAX_YAML_DEPTH, a value that holds itself, or over MAX_YAML_NODES
    values or MAX_YAML_BYTES characters once aliases (shared values) expand; `entries(node, path)`: each entry's (key
    or index, key or None, value), None for a scalar. Each node once, at most MAX_YAML_NODES: a bomb costs the bound."""
    sizes: dict[int, tuple[int, int]] = {}   # id -> (values, characters) once expanded
    open_nodes: set[int] = set()
    visits, stack = 0, [(root, [], 1, None)]
    while stack:
        node, path, depth, children = stack.pop()
        if id(node) in sizes:   # an alias of a node already counted
            continue
        if children is not None:   # all counted: its own size
            open_nodes.discard(id(node))
            sizes[id(node)] = size = tuple(map(sum, zip((1, 0), *(sizes[id(c)] for c in children))))
            if size[0] > MAX_YAML_NODES or size[1] > MAX_YAML_BYTES:
                break
            continue
        if id(node) in open_nodes:
            return path, f"an alias refers to a value that holds it{line(node)}"
        if depth > MAX_YAML_DEPTH:
            return path, f"nested more than {MAX_YAML_DEPTH} levels deep{line(node)}"
        if (items := entries(node, path)) is None:   # a scalar: a YAML node's value, or itself
            sizes[id(node)] = (1, len(text) if isinstance(text := getattr(node, "value", node), str) else 0)
            continue
        visits += len(items)
        if visits > MAX_YAML_NODES:
            break
        open_nodes.add(id(node))
        stack.append((node, path, depth, [c for _, key, value in items for c in (key, value) if c is not None]))
        stack += [(c, at, depth + 1, None) for name, key, value in items
                  for c, at in ((key, path), (value, [*path, name])) if c is not None]
    else:
        return None
    return path, (f"more than {MAX_YAML_NODES:,} values or {MAX_YAML_BYTES:,} characters once its aliases expand"
                  f"{line(node)}; write the values out, without nested aliases")


def check_nodes(root) -> None:
    """Raise ValueError (key path: problem) for a key given twice in a YAML mapping, or an _expansion_problem."""
    def entries(node, path):
        if isinstance(node, yaml.SequenceNode):
            return [(i, None, item) for i, item in enumerate(node.value)]
        if not isinstance(node, yaml.MappingNode):
            return None
        seen: dict = {}
        for key, _ in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) and key.value != "<<" else None
            if name is not None and (key.tag, name) in seen:
                raise ValueError(f"{_key_path([*path, bounded(name, 80)])}: the key is given twice (lines "
                                 f"{seen[(key.tag, name)]} and {key.start_mark.line + 1}); YAML keeps only one of them")
            seen[(key.tag, name)] = key.start_mark.line + 1
        return [(bounded(k.value, 80) if isinstance(k, yaml.ScalarNode) else "?", k, v) for k, v in node.value]

    if problem := _expansion_problem(root, entries, lambda node: f" (line {node.start_mark.line + 1})"):
        raise ValueError(f"{_key_path(problem[0])}: {problem[1]}")


def tree_problem(root) -> tuple[list, str] | None:
    """_expansion_problem of a parsed config (--config values, a profile's `config:`, a merged config)."""
    return _expansion_problem(root, lambda node, _: [(k, k, v) for k, v in node.items()] if isinstance(node, dict)
                              else [(i, None, v) for i, v in enumerate(node)] if isinstance(node, list) else None)


def check_depth(text: str) -> None:
    """Raise ValueError (key path: problem) for nesting deeper than MAX_YAML_DEPTH, from libyaml's token stream,
    before any node is composed: composing recurses once a level, and 20,000 levels overflow the C stack of a
    thread (a segmentation fault, not an error)."""
    scanner = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        frames: list[list] = []   # [is a mapping, its current key or index]
        expect_key = False
        while not isinstance(token := scanner.get_token(), (yaml.StreamEndToken, type(None))):
            if isinstance(token, (yaml.BlockMappingStartToken, yaml.FlowMappingStartToken,
                                  yaml.BlockSequenceStartToken, yaml.FlowSequenceStartToken)):
                mapping = isinstance(token, (yaml.BlockMappingStartToken, yaml.FlowMappingStartToken))
                frames.append([mapping, "?" if mapping else 0])
                if len(frames) > MAX_YAML_DEPTH:
                    path = [f[1] for f in frames[:-1]]
                    raise ValueError(f"{_key_path(path)}: nested more than {MAX_YAML_DEPTH} levels deep (line "
                                     f"{token.start_mark.line + 1})")
            elif isinstance(token, (yaml.BlockEndToken, yaml.FlowMappingEndToken, yaml.FlowSequenceEndToken)) and frames:
                frames.pop()
            elif isinstance(token, yaml.KeyToken):
                expect_key = True
            elif isinstance(token, yaml.ScalarToken) and expect_key and frames and frames[-1][0]:
                frames[-1][1] = bounded(token.value, 80)
                expect_key = False
            elif isinstance(token, yaml.FlowEntryToken) and frames and not frames[-1][0]:
                frames[-1][1] += 1
    finally:
        scanner.dispose()


def load_yaml(path):
    """A YAML file, parsed by libyaml where PyYAML has it (the schema takes 0.3 s in pure Python), refused
    with ValueError (one line, no file name) when it is too large, nests too deep, repeats a key or expands
    its aliases beyond MAX_YAML_NODES values (see check_nodes)."""
    if (size := os.path.getsize(path)) > MAX_YAML_BYTES:
        raise ValueError(f"{size:,} bytes; a config file the project reads is at most {MAX_YAML_BYTES:,}")
    text = Path(path).read_text(encoding="utf-8-sig")
    check_depth(text)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        node = loader.get_single_node()   # None: an empty file
        check_nodes(node)
        return node and loader.construct_document(node)
    finally:
        loader.dispose()


def read_yaml(path, error=None):
    """load_yaml with every problem (unreadable, not YAML, refused) as `error(path, one line)`: ParamsError
    by default."""
    error = error or (lambda where, problem: ParamsError(f"{where}: {problem}"))
    try:
        return load_yaml(path)
    except OSError as err:
        raise error(_shown(path), bounded(err.strerror or err)) from None
    except UnicodeDecodeError as err:
        raise error(_shown(path), f"not UTF-8 text ({err.reason} at byte {err.start})") from None
    except yaml.YAMLError as err:
        raise error(_shown(path), f"not valid YAML ({bounded(err, 240)})") from None
    except (ValueError, RecursionError) as err:
        raise error(_shown(path), bounded(err)) from None


load_schema = functools.lru_cache(maxsize=4)(load_yaml)   # (path) -> a schema, read once
