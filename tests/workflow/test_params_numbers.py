"""Values the schema alone lets through (issue 40): NaN and infinities, integers written as floats, mapping keys
that are not strings, alias bombs given as --config values, and a --configfile that names a folder. Each is one
line naming the file (or --config) and the key."""
import copy
import time
import tracemalloc

import pytest
import yaml

from towers.config.params_check import ParamsError, bounded, check, dotted, load_sources, merge_configs

from conftest import ROOT

SCHEMA = ROOT / "workflow/schemas/params.schema.yaml"
PARAMS = ROOT / "params.yaml"
BOUND = 400   # characters of one error line


@pytest.fixture(autouse=True)
def workflow_folder(monkeypatch):
    monkeypatch.chdir(ROOT)   # files params name are looked up where Snakemake runs


def params_error(*files, overrides=None) -> str | None:
    """The check's line for params.yaml overlaid with `files` and --config `overrides`, as the Snakefile runs it."""
    try:
        sources = load_sources([PARAMS, *files], overrides)
        check(merge_configs(*(tree for _, tree in sources)), SCHEMA, sources)
    except ParamsError as err:
        return str(err)
    return None


def overlay(tmp_path, text: str):
    path = tmp_path / "overlay.yaml"
    path.write_text(text)
    return path


def snakemake_config(*entries) -> dict:
    """--config values as Snakemake parses them (YAML's BaseLoader, aliases kept as shared values)."""
    from snakemake.cli import parse_config

    return parse_config(list(entries))


@pytest.mark.parametrize("text,expected", [
    ("finetune:\n  temperature: .nan\n", "finetune.temperature: .nan is not a finite number"),
    ("bm25:\n  k1: .inf\n", "bm25.k1: .inf is not a finite number"),
    ("valid_fraction: -.inf\n", "valid_fraction: -.inf is not a finite number"),
    ("claims:\n  extra: [1, .NaN]\n", "claims.extra[1]: .nan is not a finite number"),   # anywhere, known key or not
])
def test_nan_and_infinities_are_refused_anywhere(tmp_path, text, expected):
    path = overlay(tmp_path, text)
    assert params_error(path) == f"{path}: {expected}"


def test_nan_given_through_config_names_config():
    assert params_error(overrides=snakemake_config("valid_fraction=nan")) == \
        "--config: valid_fraction: .nan is not a finite number"


def test_an_integer_written_as_a_float_is_refused(tmp_path):
    path = overlay(tmp_path, "finetune:\n  steps: 1.0e+1\n")
    assert params_error(path) == f"{path}: finetune.steps: 10.0 is a float; this key takes an integer, written as one (10)"
    assert params_error(overrides=snakemake_config("seed=1e1")).startswith("--config: seed: 10.0 is a float")


def ints(tree, path=()):
    """(path, value) of every integer in a config."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from ints(value, (*path, key))
    elif isinstance(tree, list):
        for i, value in enumerate(tree):
            yield from ints(value, (*path, i))
    elif isinstance(tree, int) and not isinstance(tree, bool):
        yield list(path), tree


def test_every_integer_key_refuses_a_float():
    """Every integer of the paper's config given as a float: refused where the schema says integer (one type
    checker, not key by key), taken where it says number."""
    config = merge_configs(*(yaml.safe_load(p.read_text()) for p in (PARAMS, ROOT / "config/paper.yaml")))
    refused = 0
    for path, value in ints(config):
        bad = copy.deepcopy(config)
        node = bad
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = float(value)
        try:
            check(bad, SCHEMA, [("params.yaml", bad)])
        except ParamsError as err:
            assert str(err).startswith(f"params.yaml: {dotted(path)}: {float(value)!r} is a float"), (path, str(err))
            refused += 1
    assert refused > 30


def test_legitimate_floats_pass(tmp_path):
    assert params_error(overlay(tmp_path, "finetune:\n  lr: 1.0e-4\n  temperature: 1.0\n")) is None


def test_a_number_as_a_key_is_refused_naming_the_file_that_adds_it(tmp_path):
    path = overlay(tmp_path, "splits:\n  50: 0.5\n")   # params.yaml sets splits; the overlay adds the key
    assert params_error(path) == f"{path}: splits: the key 50 is a number, not a name; quote it: '50'"


def test_a_dataset_named_on_is_refused_with_the_reason(tmp_path):
    path = overlay(tmp_path, "datasets:\n  on:\n    kind: squad\n")
    assert params_error(path) == (f"{path}: datasets: the key true is not a name: YAML read the bare word (on, off, "
                                  "yes, no, true or false) as the boolean true; quote it, e.g. 'on'")
    assert params_error(overlay(tmp_path, "datasets:\n  'on':\n    kind: squad\n")).startswith(
        f"{path}: datasets.on: ")   # quoted: a name, checked as one (here: its missing keys)


def alias_bomb(levels: int) -> str:
    """Nested aliases in one YAML flow value, as `--config bm25=...` takes it."""
    text = "[&a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"
    for i in range(1, levels + 1):
        text += f", &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]"
    return text + "]"


def test_an_alias_bomb_given_through_config_is_refused_quickly():
    """7 levels (43M values once expanded) took 53 s and over 4 GB, then a MemoryError traceback."""
    began = time.perf_counter()
    message = params_error(overrides=snakemake_config(f"bm25={alias_bomb(7)}"))
    assert time.perf_counter() - began < 10
    assert message.startswith("--config: bm25[") and "aliases expand" in message and len(message) < BOUND, message


def test_one_long_string_given_many_times_is_refused():
    """Few values, but a schema message would quote 100 MB."""
    message = params_error(overrides={"bm25": {"k1": ["x" * 1_000_000] * 100}})
    assert message.startswith("--config: bm25.k1: ") and "characters once its aliases expand" in message, message


def test_the_check_bounds_a_merged_config_itself():
    """A caller that merged without load_sources (Snakemake's own config) is bounded too."""
    config = merge_configs(yaml.safe_load(PARAMS.read_text()))
    config["bm25"]["k1"] = yaml.load(alias_bomb(5), Loader=yaml.BaseLoader)
    with pytest.raises(ParamsError, match="aliases expand") as caught:
        check(config, SCHEMA, [("params.yaml", config)])
    assert str(caught.value).startswith("params.yaml: bm25.k1[") and len(str(caught.value)) < BOUND


def test_bounded_joins_only_the_words_it_shows():
    text = "word " * 1_000_000
    tracemalloc.start()
    try:
        assert bounded(text, 20) == "word word word word ..."
        assert tracemalloc.get_traced_memory()[1] < 1_000_000
    finally:
        tracemalloc.stop()


def test_a_configfile_that_is_a_folder_is_one_line(tmp_path):
    assert params_error(tmp_path) == f"{tmp_path}/: --configfile names a folder, not a YAML file"


def test_the_committed_configs_still_pass():
    overlays = sorted((ROOT / "config").rglob("*.yaml"))
    assert ROOT / "config/paper.yaml" in overlays
    for extra in ([], *([overlay] for overlay in overlays)):
        assert params_error(*extra) is None, extra
