"""Run-time choices (theme, streaming, tool panels) are written to the user's
config file and read back on the next start; the file keeps its comments."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import pytest

from memchat.engine.model import ConfigError
from memchat.preferences import update_toml
from memchat.settings import Settings

from .support import make_app, make_settings, ready, wait_until

SIZE = (120, 40)


def test_update_toml_sets_keys_and_keeps_everything_else() -> None:
    text = '# my settings\n[model]\n# stream?\nstreaming = true\nname = "x"\n\n[memory]\nbackend = "redis"\n'
    values = {("model", "streaming"): False, ("tui", "theme"): "nord", ("memory", "limit"): 5}
    updated = update_toml(text, values)
    data = tomllib.loads(updated)
    assert data["model"] == {"streaming": False, "name": "x"}
    assert data["tui"] == {"theme": "nord"} and data["memory"] == {"backend": "redis", "limit": 5}
    assert "# my settings" in updated and "# stream?" in updated
    assert update_toml(updated, {("tui", "theme"): "dracula"}).count("theme =") == 1


def test_settings_read_the_tui_section(tmp_path: Path) -> None:
    config = tmp_path / "memchat.toml"
    config.write_text('[tui]\ntheme = "nord"\ntool_panels = "expanded"\n')
    settings = Settings.load({"memory": "inmemory"}, environ={}, config_file=config, cwd=tmp_path)
    assert (settings.theme, settings.tool_panels) == ("nord", "expanded")
    assert settings.preferences_file == str(config)  # changes go back where the settings came from
    config.write_text('[tui]\ntool_panels = "open"\n')
    with pytest.raises(ConfigError, match="tool_panels in the config file is 'open': choose compact"):
        Settings.load({"memory": "inmemory"}, environ={}, config_file=config, cwd=tmp_path)


async def test_theme_streaming_and_panels_are_remembered(tmp_path: Path) -> None:
    config = tmp_path / "memchat.toml"
    config.write_text('# mine\n[memory]\nbackend = "inmemory"\n')
    settings = dataclasses.replace(make_settings(), preferences_file=str(config))
    app = make_app(settings)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+t")
        await pilot.press("ctrl+o")
        app.theme = "nord"
        await wait_until(pilot, lambda: "theme" in config.read_text(), what="the theme saved")
        await wait_until(pilot, lambda: "tool_panels" in config.read_text(), what="the panels saved")
    saved = tomllib.loads(config.read_text())
    assert saved["model"]["streaming"] is False
    assert saved["tui"] == {"theme": "nord", "tool_panels": "expanded"}
    assert config.read_text().startswith("# mine")
    # The next start uses them.
    again = Settings.load({}, environ={}, config_file=config, cwd=tmp_path)
    app = make_app(again)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert app.theme == "nord" and app.streaming is False and app.tools_expanded


async def test_an_unknown_theme_is_said_and_ignored() -> None:
    app = make_app(make_settings(theme="no-such-theme"))
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await ready(pilot)
        assert app.theme == "textual-dark"
        assert any("no-such-theme" in n.message for n in app._notifications)
