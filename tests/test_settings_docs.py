"""One declaration per setting (memchat/settings.py) is the source of the
documented files and of the command-line options: a stale file, a choice the
engine does not know, or an option that drifted from its declaration fails here."""

from __future__ import annotations

from pathlib import Path

import pytest

from memchat.settings import DEFAULTS, SPECS, Settings
from memchat.settings_docs import COMMAND, GENERATED, main, stale
from tests.test_cli import env as env  # the fixture: SQLite in tmp_path, no MEMCHAT_/OPENAI_ variables
from tests.test_cli import run

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("relative", sorted(GENERATED))
def test_the_generated_file_is_up_to_date(relative: str) -> None:
    assert relative not in stale(), f"{relative} is stale: run `{COMMAND}` to regenerate it"


def test_the_check_names_the_stale_file_and_the_command(tmp_path: Path, capsys) -> None:
    """`--check` on a tree whose .env.example was edited by hand says which file and how to fix it."""
    for relative in GENERATED:
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text((ROOT / relative).read_text(encoding="utf-8"), encoding="utf-8")
    assert stale(tmp_path) == {}
    example = tmp_path / "config" / ".env.example"
    example.write_text(example.read_text(encoding="utf-8").replace("MEMCHAT_USER=user", "MEMCHAT_USER=bob"))
    assert list(stale(tmp_path)) == ["config/.env.example"]
    assert main(["--check"], root=tmp_path) == 1
    assert capsys.readouterr().err == f"config/.env.example is stale: run `{COMMAND}` to regenerate it\n"
    assert main([], root=tmp_path) == 0  # regenerating puts the declared text back
    assert stale(tmp_path) == {} and "MEMCHAT_USER=user" in example.read_text(encoding="utf-8")


def test_declared_choices_are_the_engines() -> None:
    from backends import BACKEND_NAMES
    from memchat.engine.embedding import EMBEDDER_CHOICES
    from memchat.engine.extraction import POLICIES
    from memchat.engine.model import SEARCH_MODES
    from memchat.engine.tools import ALL_TOOLS

    assert set(SPECS["memory"].choices) == set(BACKEND_NAMES)
    assert SPECS["search"].choices == SEARCH_MODES
    assert SPECS["embedder"].choices == EMBEDDER_CHOICES
    assert SPECS["update_policy"].choices == POLICIES
    assert all(tool in SPECS["enable_tools"].help for tool in ALL_TOOLS)  # --help lists every tool
    for name, spec in SPECS.items():
        if spec.choices:
            assert DEFAULTS[name] in spec.choices, name
            for choice in spec.choices:
                assert choice in spec.help, f"{name}'s help does not name {choice}"


def test_every_declared_flag_is_an_option_with_its_help(env) -> None:
    """The chat's --help shows each flag with its metavar, and the help says where else to set it."""
    text = " ".join(run("-h").stdout.split())
    for spec in SPECS.values():
        if spec.flag and "chat" in spec.commands:
            shown = f"{spec.flag} {spec.metavar}" if spec.metavar else spec.flag.replace("/", " / ")
            assert shown in text, shown
            if spec.env:
                assert spec.env in text, spec.env
    mcp = " ".join(run("mcp", "-h").stdout.split())
    assert "--enable-tool TOOL" in mcp and "--soft-delete / --hard-delete" in mcp and "--model" not in mcp


def test_a_flag_reaches_its_setting(env, monkeypatch) -> None:
    """Each derived option lands in the Settings field it was declared on."""
    from memchat import cli

    seen: list[Settings] = []
    real = cli._settings

    def spy(**flags):
        seen.append(real(**flags))
        return seen[-1]

    monkeypatch.setattr(cli, "_settings", spy)
    args = ["--plain", "--model", "offline", "--preload", "3", "--no-streaming", "--search", "Keyword",
            "--extract", "--extract-interval", "2m", "--expose-tool", "memory_add",
            "-u", "alice"]  # fmt: skip
    result = run(*args, input="/exit\n")
    assert result.exit_code == 0, result.output
    (s,) = seen
    assert (s.plain, s.model, s.preload, s.streaming, s.search) == (True, "offline", 3, False, "keyword")
    assert (s.extract, s.extract_interval, s.expose_tools, s.user) == (True, 120.0, ("memory_add",), "alice")
