"""The one config loader: a frozen dataclass (with nested dataclass sections) from a file, the environment and
flags.

Every service and ``phylorl train`` use it. Sources, later ones winning: the dataclass defaults < a YAML/JSON
file (``--config PATH`` or ``<PREFIX>CONFIG``; nested sections are nested mappings) < environment variables
``<PREFIX><FIELD>``, where a nested field joins its path with ``__`` (``PHYLORL_LEARNER_AGENT__LR``) < flags
``--<field-name>``, where a nested field joins its path with ``.`` (``--agent.lr``). The environment is passed
in as a mapping: nothing here reads ``os.environ``.

Each field is documented once, by the attribute docstring under it; ``--help`` lists every field (nested
ones included) with that text, its default and its environment variable.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import json
import textwrap
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

_BOOLS = dict.fromkeys(("1", "true", "yes", "on"), True) | dict.fromkeys(("0", "false", "no", "off"), False)


def field_docs(cls) -> dict[str, str]:
    """``{field: the attribute docstring under it}`` of a dataclass and its dataclass bases."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            body = ast.parse(textwrap.dedent(inspect.getsource(klass))).body[0].body
        except (OSError, TypeError, IndexError):
            continue
        for stmt, following in zip(body, body[1:]):
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            ):
                docs[stmt.target.id] = " ".join(following.value.value.split())
    return docs


def nested_types(cls) -> dict[str, type]:
    """``{field: dataclass}`` of the fields of ``cls`` that are sections (nested dataclasses)."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls) if dataclasses.is_dataclass(hints[f.name])}


def leaves(config) -> list[tuple[tuple[str, ...], Any, Any, str, Mapping]]:
    """``(path, type, value, doc, field metadata)`` of every plain field of ``config``, sections walked."""
    cls = type(config)
    hints, docs, sections = typing.get_type_hints(cls), field_docs(cls), nested_types(cls)
    out = []
    for f in dataclasses.fields(cls):
        value = getattr(config, f.name)
        if f.name in sections:
            out += [((f.name, *path), *rest) for path, *rest in leaves(value)]
        else:
            out.append(((f.name,), hints[f.name], value, docs.get(f.name, ""), f.metadata))
    return out


def env_name(prefix: str, path: Sequence[str]) -> str:
    return prefix + "__".join(path).upper()


def add_flags(
    parser: argparse.ArgumentParser,
    base,
    env_prefix: str = "",
    exclude: frozenset = frozenset(),
    listed: Callable[[tuple[str, ...]], bool] = lambda path: True,
) -> None:
    """One flag per plain field of ``base`` (an instance: its values are the defaults shown). A bool flag
    alone means true (``--secure``; ``--secure false`` too); field metadata ``{"const": v}`` lets the flag
    stand alone for ``v``, and ``{"multiple": True}`` takes several values, repeatable, joined with commas. A
    field whose path ``listed`` refuses is accepted but left out of ``--help``."""
    for path, hint, value, doc, meta in leaves(base):
        if ".".join(path) in exclude:
            continue
        where = f"; env {env_name(env_prefix, path)}" if env_prefix else ""
        options = {
            "dest": ".".join(path),
            "default": None,
            "help": f"{doc} [default {value!r}{where}]".replace("%", "%%")
            if listed(path)
            else argparse.SUPPRESS,
        }
        if hint is bool:
            options.update(nargs="?", const="true", metavar="BOOL")
        elif "const" in meta:
            options.update(nargs="?", const=str(meta["const"]))
        elif meta.get("multiple"):
            options.update(nargs="+", action="extend", metavar="VALUE")
        parser.add_argument("--" + ".".join(path).replace("_", "-"), **options)


def flag_values(namespace: argparse.Namespace, base) -> dict:
    """The flags of ``base``'s fields that were given, as a nested mapping (other flags are left out)."""
    values: dict = {}
    given = vars(namespace)
    for path, *_ in leaves(base):
        value = given.get(".".join(path))
        if value is not None:
            put(values, list(path), ",".join(map(str, value)) if isinstance(value, list) else value)
    return values


def file_values(path: str | Path) -> dict:
    loaded = yaml.safe_load(Path(path).read_text()) or {}  # JSON is valid YAML
    if not isinstance(loaded, dict):
        raise ValueError(f"config file {path} must hold a mapping of field names to values")
    return loaded


def env_values(base, environ: Mapping[str, str], prefix: str) -> dict:
    """``<PREFIX><FIELD>`` variables as a nested mapping; an unknown one is an error."""
    known = {env_name(prefix, path): path for path, *_ in leaves(base)}
    values: dict = {}
    for key, text in environ.items():
        if key.startswith(prefix) and key != f"{prefix}CONFIG":
            if key not in known:
                raise ValueError(f"unknown environment variable {key}; known: {sorted(known)}")
            put(values, list(known[key]), text)
    return values


def paths(values: Mapping, prefix: str = "") -> list[str]:
    """The dotted paths of the plain values in a nested mapping."""
    out = []
    for key, value in values.items():
        out += paths(value, f"{prefix}{key}.") if isinstance(value, Mapping) else [f"{prefix}{key}"]
    return out


def merge(*mappings: Mapping) -> dict:
    """Nested mappings merged, later ones winning field by field."""
    out: dict = {}
    for mapping in mappings:
        for key, value in mapping.items():
            if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
                out[key] = merge(out[key], value)
            else:
                out[key] = dict(value) if isinstance(value, Mapping) else value
    return out


def build(cls, values: Mapping, base=None, where: str = ""):
    """``base`` (default: ``cls()``) with ``values`` (a nested mapping) applied; values are converted to the
    fields' types and the dataclasses' own checks run. Unknown names are an error naming the known ones."""
    base = cls() if base is None else base
    hints, sections = typing.get_type_hints(cls), nested_types(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - names)
    if unknown:
        raise ValueError(
            f"unknown config field {where}{unknown[0]}; known in {where or 'the top level'}: {sorted(names)}"
        )
    changes = {}
    for name, value in values.items():
        if name in sections:
            if not isinstance(value, Mapping):
                raise ValueError(
                    f"config section {where}{name} must be a mapping of its fields, got {value!r}"
                )
            changes[name] = build(sections[name], value, getattr(base, name), f"{where}{name}.")
        else:
            changes[name] = convert(f"{where}{name}", hints[name], value)
    return dataclasses.replace(base, **changes)


def load_config(
    cls, argv: Sequence[str], environ: Mapping[str, str], *, prefix: str, prog: str, description: str
):
    """Build ``cls`` from its sources (see the module docstring)."""
    base = cls()
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--config", type=Path, help=f"YAML or JSON file of fields (or ${prefix}CONFIG)")
    add_flags(parser, base, prefix)
    namespace = parser.parse_args(list(argv))
    path = namespace.config or environ.get(f"{prefix}CONFIG")
    values = merge(
        file_values(path) if path else {}, env_values(base, environ, prefix), flag_values(namespace, base)
    )
    return build(cls, values, base)


def convert(name: str, hint, value: Any) -> Any:
    """Coerce a file/env/flag value to the field's annotated type (``int``, ``float``, ``str``, ``bool``,
    a ``Literal`` of strings, or ``X | None``, where ``none``/empty means None)."""
    args = typing.get_args(hint)
    if type(None) in args:
        if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "null")):
            return None
        hint = next(a for a in args if a is not type(None))
    if typing.get_origin(hint) is typing.Literal:
        if value in typing.get_args(hint):
            return value
        raise ValueError(f"config field {name} must be one of {list(typing.get_args(hint))}, got {value!r}")
    try:
        if hint is bool:
            return value if isinstance(value, bool) else _BOOLS[str(value).strip().lower()]
        if hint is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if hint in (int, float, str):
            if isinstance(value, hint) and not isinstance(value, bool):
                return value
            if isinstance(value, str):
                return hint(value)
            if hint is str and isinstance(value, Path):
                return str(value)
    except (ValueError, KeyError):
        pass
    raise ValueError(f"config field {name} expects {getattr(hint, '__name__', hint)}, got {value!r}")


def config_json(config) -> str:
    """One-line JSON of every field (sections nested), for the start-up log."""
    return json.dumps(dataclasses.asdict(config), sort_keys=True)


def write_config(config, path: str | Path) -> Path:
    """``config`` as a JSON file that :func:`load_config` reads back (``--config PATH``) to the same value."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dataclasses.asdict(config), indent=2, sort_keys=True) + "\n")
    return path


def put(values: dict, path: list[str], value: Any) -> None:
    """``value`` at ``path`` in the nested mapping ``values``."""
    for part in path[:-1]:
        values = values.setdefault(part, {})
    values[path[-1]] = value
