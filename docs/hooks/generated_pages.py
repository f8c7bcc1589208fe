"""MkDocs hook: the pages generated from the code at every build, never committed.

- `reference/cli.md`: Typer's own documentation generator (`typer lake_assets.cli utils docs`)
  over the `lake` app, run as a subprocess of the project's interpreter, so the page is what
  `lake COMMAND --help` prints.
- `reference/settings.md`: every variable of `lake_assets/settings.py` (`ENV_VARS`) with the
  settings model field it fills, its default and its meaning, read from the pydantic models.
- `benchmark-details.md` and `images/cdc_batches.png`: `benchmarks/README.md` and the plot under
  `benchmarks/results/`, which live beside the scripts that write them.

A hook (MkDocs' own `on_files` event and `File.generated`) rather than a plugin: it needs no
package beyond MkDocs.
"""

import subprocess
import sys
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]


def on_files(files: Files, config: MkDocsConfig) -> Files:
    files.append(File.generated(config, "reference/cli.md", content=cli_reference()))
    files.append(File.generated(config, "reference/settings.md", content=settings_reference()))
    files.append(File.generated(config, "benchmark-details.md", content=(ROOT / "benchmarks/README.md").read_text()))
    files.append(File.generated(config, "images/cdc_batches.png",
                                abs_src_path=str(ROOT / "benchmarks/results/cdc_batches.png")))
    return files


def cli_reference() -> str:
    """The `lake` command's help, every command and option, as Typer documents a Typer app."""
    generated = subprocess.run([sys.executable, "-m", "typer", "lake_assets.cli", "utils", "docs", "--name", "lake"],
                               cwd=ROOT, capture_output=True, text=True, check=True).stdout
    title, _, body = generated.partition("\n")
    assert title == "# `lake`", title
    return ("# CLI reference\n\nGenerated from the code at every docs build (Typer's `utils docs` over the `lake` "
            "app): the same text as `lake --help` and `lake COMMAND --help`. How the commands fit together: "
            "[Using `lake`](../cli.md).\n\n## `lake`\n" + body)


def settings_reference() -> str:
    """Every environment variable `lake` reads, grouped by the settings model (and so the Dagster resource) it fills."""
    from lake_assets import settings

    models = [(settings.StorageSettings, "the `storage` resource"), (settings.SailSettings, "the `engine` resource"),
              (settings.EngineSettings, "the `engine` resource"), (settings.RulesSettings, "the `rules` resource")]
    placed: set[str] = set()
    out = ["# Settings reference", "",
           "Generated from `lake_assets/settings.py` at every docs build: every environment variable `lake` "
           "reads, its default and its meaning, as the Dagster UI shows them in each resource's configuration.", "",
           _docstring(settings.__doc__)]
    for model, resource in models:
        rows = []
        for name, field in model.model_fields.items():
            variable, meaning = _split(field.description or "")
            if variable in placed or (variable is None and name in _inherited(model)):
                continue
            placed.add(variable or "")
            rows.append(f"| {_code(variable)} | {_default(field.default)} | {_cell(meaning)} | `{name}` |")
        if rows:
            out += ["", f"## `{model.__name__}`", "", f"{_docstring(model.__doc__)} Fills {resource}.", "",
                    "| variable | default | meaning | field |", "|---|---|---|---|", *rows]
    others = [(variable, meaning) for variable, meaning in settings.ENV_VARS.items() if variable not in placed]
    out += ["", "## Read by the CLI and the sensors", "",
            "Variables that fill no resource field: `LakeSettings.from_env()` reads the sensors' pace and the CLI's "
            "own, and `s3_credentials()` the key pair (never stored in resource config, logs or metadata).", "",
            "| variable | meaning |", "|---|---|",
            *(f"| `{variable}` | {_cell(meaning)} |" for variable, meaning in others), ""]
    return "\n".join(out)


def _split(description: str) -> tuple[str | None, str]:
    """`meaning (VARIABLE)` as the settings module writes a field's description -> (VARIABLE, meaning)."""
    meaning, _, variable = description.rstrip(")").rpartition(" (")
    if meaning and variable.isupper() and " " not in variable:
        return variable, meaning
    return None, description


def _inherited(model: type) -> set[str]:
    return {name for base in model.__mro__[1:] for name in getattr(base, "model_fields", {})}


def _docstring(text: str | None) -> str:
    """A docstring as Markdown paragraphs (its line breaks are the source's, not the reader's)."""
    return "\n\n".join(" ".join(paragraph.split()) for paragraph in (text or "").strip().split("\n\n"))


def _code(variable: str | None) -> str:
    return f"`{variable}`" if variable else "—"


def _default(value: Any) -> str:
    return "(unset)" if value == "" else f"`{value}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
