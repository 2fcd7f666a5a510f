"""Loading a service's frozen config dataclass from a file, the environment and command-line flags.

Sources, later ones winning: field defaults < a YAML/JSON file (``--config PATH`` or
``<PREFIX>CONFIG``) < environment variables ``<PREFIX><FIELD>`` < flags ``--<field-name>``.
The environment is passed in as a mapping: nothing here reads ``os.environ``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import typing
from collections.abc import Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any

import yaml

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def doc(text: str, default: Any) -> Any:
    """A dataclass field with a default and its one-line documentation (shown in ``--help``)."""
    return field(default=default, metadata={"doc": text})


def load_config(cls, argv: Sequence[str], environ: Mapping[str, str], *, prefix: str, prog: str,
                description: str):
    """Build ``cls`` (a frozen dataclass whose fields use :func:`doc`) from its three sources."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--config", type=Path, help=f"YAML or JSON file of fields (or ${prefix}CONFIG)")
    for f in fields.values():
        parser.add_argument(f"--{f.name.replace('_', '-')}", dest=f.name, default=None,
                            help=f"{f.metadata.get('doc', '')} [default {f.default}; env {prefix}{f.name.upper()}]")
    flags = vars(parser.parse_args(list(argv)))
    values: dict[str, Any] = {}
    path = flags.pop("config") or environ.get(f"{prefix}CONFIG")
    if path:
        loaded = yaml.safe_load(Path(path).read_text()) or {}  # JSON is valid YAML
        if not isinstance(loaded, dict):
            raise ValueError(f"config file {path} must hold a mapping of field names to values")
        unknown = sorted(set(loaded) - set(fields))
        if unknown:
            raise ValueError(f"config file {path} has unknown fields {unknown}; known: {sorted(fields)}")
        values.update(loaded)
    for key, text in environ.items():
        if key.startswith(prefix) and key != f"{prefix}CONFIG":
            name = key[len(prefix):].lower()
            if name not in fields:
                raise ValueError(f"unknown environment variable {key}; known fields: {sorted(fields)}")
            values[name] = text
    values.update({k: v for k, v in flags.items() if v is not None})
    return cls(**{k: convert(k, hints[k], v) for k, v in values.items()})


def convert(name: str, hint, value: Any) -> Any:
    """Coerce a file/env/flag value to the field's annotated type (``int``, ``float``, ``str``,
    ``bool`` or ``X | None``, where ``none``/empty means None)."""
    args = typing.get_args(hint)
    if type(None) in args:
        if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "null")):
            return None
        hint = next(a for a in args if a is not type(None))
    try:
        if hint is bool:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in _TRUE:
                return True
            if text in _FALSE:
                return False
            raise ValueError
        if hint is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if hint in (int, float, str):
            if isinstance(value, hint) and not isinstance(value, bool):
                return value
            if isinstance(value, str):
                return hint(value)
    except ValueError:
        pass
    raise ValueError(f"config field {name} expects {getattr(hint, '__name__', hint)}, got {value!r}")


def config_json(config) -> str:
    """One-line JSON of every field, for the start-up log."""
    return json.dumps(dataclasses.asdict(config), sort_keys=True)
