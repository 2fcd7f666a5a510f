"""The ``phylorl`` command line: one sub-command per module in this package.

Every sub-command turns expected failures (bad input files, bad model strings, unreachable
services) into a one-line message on stderr and a non-zero exit status, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# the sub-commands, each a module of this package (named as the command but for MODULES) with ``HELP``,
# ``add_arguments(parser)`` and ``run(args)``
COMMANDS = ("loglik", "search", "simulate", "train", "report", "eval")
MODULES = {"eval": "evaluate"}
ALIASES = {"eval": ["evaluate"]}  # other names of a sub-command (same module, same flags)


class CliError(Exception):
    """An expected failure with a message for the user."""


def build_parser() -> argparse.ArgumentParser:
    from phylorl import __version__

    parser = argparse.ArgumentParser(prog="phylorl", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"phylorl {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"{__name__}.{MODULES.get(name, name)}")
        p = sub.add_parser(name, aliases=ALIASES.get(name, []), help=module.HELP, description=module.__doc__)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


COMPILING = ("search", "eval", "evaluate", "train", "loglik")
"""Sub-commands that run compiled kernels: each says so before it starts when they are not compiled yet."""


def main(argv: list[str] | None = None) -> int:
    from phylorl.jit_cache import is_compiled, use_source_keyed_cache

    # before any sub-command imports a compiled kernel (and for the services it starts)
    use_source_keyed_cache()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] and argv[0] in COMPILING and not {"-h", "--help"} & set(argv) and not is_compiled():
        print(
            "phylorl: this version's kernels are not compiled yet: the first use of each compiles it (about "
            "a minute in all on 2 cores; python scripts/compile_kernels.py compiles them ahead, as "
            "scripts/install.sh does)",
            file=sys.stderr,
        )
    if argv[:1] == ["train"]:  # its flags (--help too) belong to python -m services.launcher
        from phylorl.cli import train

        return run_command("train", train.run, argparse.Namespace(argv=argv[1:]))
    args = build_parser().parse_args(argv)
    names = {args.command, *ALIASES.get(args.command, [])}
    args.argv = argv[next(i for i, a in enumerate(argv) if a in names) + 1 :]  # this command's own flags
    return run_command(args.command, args._run, args)


def run_command(name: str, run, args) -> int:
    """``run(args)``'s exit status; an expected failure becomes one line on stderr and status 2, Ctrl-C
    130."""
    try:
        return int(run(args) or 0)
    except KeyboardInterrupt:
        print("phylorl: interrupted", file=sys.stderr)
        return 130
    except (CliError, ValueError, OSError) as exc:  # input errors carry their own clear messages
        print(f"phylorl {name}: error: {exc}", file=sys.stderr)
        return 2
