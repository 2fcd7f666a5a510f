"""Nucleotide substitution model specifications written as IQ-TREE 2 model strings.

A :class:`ModelSpec` says *which* model is meant and which of its numbers are fixed; it holds no
matrices (see :mod:`phylorl.phylo.models` for those). Grammar, following IQ-TREE 2::

    MODEL      := NAME['{' numbers '}'] ('+' COMPONENT)*          components in any order, each once
    NAME       := JC | K80 | K2P | F81 | HKY | GTR               case-insensitive, as IQ-TREE
    K80, HKY   := '{kappa}'                                      transition/transversion rate ratio
    GTR        := '{AC,AG,AT,CG,CT}' (GT = 1) | '{AC,AG,AT,CG,CT,GT}' (divided by GT)
    COMPONENT  := F | FQ | FO | F{pA,pC,pG,pT}                   empirical | equal | ML-estimated | fixed
                | I | I{pinv}                                    proportion of invariable sites
                | G | Gk | G{alpha} | Gk{alpha}                  discrete gamma, k categories (default 4)

A name or component without its numbers leaves those parameters free (to be estimated by a
fitting routine). Defaults mirror IQ-TREE 2.0.7 (checked against its ``.iqtree`` reports):

* ``JC`` and ``K80`` always have equal frequencies. IQ-TREE silently ignores ``+F``/``+F{..}``/``+FO``
  on them; here they are an error (use ``F81``/``HKY``). ``+FQ`` is accepted.
* ``F81``, ``HKY`` and ``GTR`` without a frequency component use empirical frequencies (``+F``).
* Fixed frequencies must sum to 1 within 0.01 (IQ-TREE's rule) and are then normalised.
* ``+G`` means ``+G4``; rates are the category means (IQ-TREE's default, Yang 1994).
* Gamma shapes below ``MIN_GAMMA_SHAPE`` (0.02) are an error: IQ-TREE silently raises them to 0.02.

Divergences from IQ-TREE, all stricter: zero rates/frequencies, duplicated components and extra
numbers (IQ-TREE accepts ``HKY{2,3}``) raise :class:`ModelError`.

The canonical string (``str(spec)``) orders components ``+F``, ``+I``, ``+G`` like IQ-TREE and writes
each number as Python's shortest round-trip repr, so ``parse_model(str(spec)) == spec``.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass

KINDS = ("JC", "K80", "F81", "HKY", "GTR")
_ALIASES = {"K2P": "K80"}
_EQUAL_FREQ_KINDS = ("JC", "K80")
FREQ_MODES = ("equal", "empirical", "estimate")
MIN_GAMMA_SHAPE = 0.02  # IQ-TREE's default lower bound (-min_gamma_shape); smaller values are raised to it
FREQ_SUM_TOLERANCE = 1e-2  # IQ-TREE: |sum(freqs) - 1| > 0.01 is an error, smaller deviations are normalised
_NORMALISED_TOLERANCE = 1e-14  # a tuple closer than this to sum 1 is kept as is (keeps str/parse idempotent)
_PAIRS = ("AC", "AG", "AT", "CG", "CT", "GT")
_EXPECTED_COMPONENTS = "+F, +FQ, +FO, +F{pA,pC,pG,pT}, +I, +I{pinv}, +G, +Gk, +G{alpha}, +Gk{alpha}"


class ModelError(ValueError):
    """A model string or parameter value that does not describe a valid model."""


@dataclass(frozen=True)
class ModelSpec:
    """A nucleotide model: substitution kind, frequencies and rate heterogeneity. Fields left ``None`` (or
    ``freqs == "estimate"``) are free parameters. Construction validates and normalises: exchangeabilities are
    divided by GT, fixed frequencies by their sum."""

    kind: str  # JC, K80, F81, HKY or GTR
    exchangeabilities: tuple[float, ...] | None  # AC, AG, AT, CG, CT, GT (GT = 1); None: free (K80, HKY, GTR)
    freqs: str | tuple[float, float, float, float]  # "equal", "empirical", "estimate" (free) or fixed, sum 1
    gamma_categories: int = 0  # discrete gamma categories; 0: no rate heterogeneity
    alpha: float | None = None  # gamma shape; None: free (and must be None without +G)
    invariant: bool = False  # whether a proportion of sites is invariable (+I)
    pinv: float | None = None  # proportion of invariable sites in [0, 1); None: free (and None without +I)

    def __post_init__(self) -> None:
        kind = self.kind
        if kind not in KINDS:
            raise ModelError(f"unknown model kind {kind!r}: expected one of {', '.join(KINDS)}")
        object.__setattr__(
            self, "exchangeabilities", _checked_exchangeabilities(kind, self.exchangeabilities)
        )
        object.__setattr__(self, "freqs", _checked_freqs(kind, self.freqs))
        k = self.gamma_categories
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ModelError(f"gamma_categories must be an integer >= 0, got {k!r}")
        if self.alpha is not None:
            if k == 0:
                raise ModelError(f"alpha={self.alpha!r} given but the model has no +G component")
            alpha = _as_float(self.alpha, "alpha")
            if not alpha >= MIN_GAMMA_SHAPE:
                raise ModelError(
                    f"gamma shape alpha must be >= {MIN_GAMMA_SHAPE} (IQ-TREE's minimum; it silently raises "
                    f"smaller values), got {self.alpha!r}"
                )
            object.__setattr__(self, "alpha", alpha)
        if not isinstance(self.invariant, bool):
            raise ModelError(f"invariant must be a bool, got {self.invariant!r}")
        if self.pinv is not None:
            if not self.invariant:
                raise ModelError(f"pinv={self.pinv!r} given but the model has no +I component")
            pinv = _as_float(self.pinv, "pinv")
            if not 0 <= pinv < 1:
                raise ModelError(f"pinv must be in [0, 1), got {self.pinv!r}")
            object.__setattr__(self, "pinv", pinv)

    def __str__(self) -> str:
        out, rates = self.kind, self.exchangeabilities
        if rates is not None and self.kind in ("K80", "HKY", "GTR"):
            out += _braces(rates[:5] if self.kind == "GTR" else rates[1:2])
        if self.kind not in _EQUAL_FREQ_KINDS:
            if isinstance(self.freqs, tuple):
                out += "+F" + _braces(self.freqs)
            else:
                out += {"empirical": "+F", "equal": "+FQ", "estimate": "+FO"}[self.freqs]
        if self.invariant:
            out += "+I" + ("" if self.pinv is None else _braces([self.pinv]))
        if self.gamma_categories:
            out += f"+G{self.gamma_categories}" + ("" if self.alpha is None else _braces([self.alpha]))
        return out

    @property
    def free_parameters(self) -> tuple[str, ...]:
        """Names of the parameters still to be estimated, in field order (subset of
        ``exchangeabilities``, ``freqs``, ``alpha``, ``pinv``)."""
        free = []
        if self.exchangeabilities is None:
            free.append("exchangeabilities")
        if self.freqs == "estimate":
            free.append("freqs")
        if self.gamma_categories and self.alpha is None:
            free.append("alpha")
        if self.invariant and self.pinv is None:
            free.append("pinv")
        return tuple(free)

    def with_values(self, **values) -> ModelSpec:
        """A copy with parameters filled or replaced. Keywords: ``exchangeabilities`` (5 or 6 values, see
        class doc), ``kappa`` (K80/HKY shorthand for ``(1, kappa, 1, 1, kappa, 1)``), ``freqs`` (a mode string
        or 4 numbers), ``alpha``, ``pinv``."""
        allowed = ("exchangeabilities", "kappa", "freqs", "alpha", "pinv")
        unknown = sorted(set(values) - set(allowed))
        if unknown:
            raise ModelError(f"with_values: unknown parameter(s) {unknown}; expected some of {allowed}")
        if "kappa" in values:
            if self.kind not in ("K80", "HKY"):
                raise ModelError(f"kappa applies to K80 and HKY only, not {self.kind}")
            if "exchangeabilities" in values:
                raise ModelError("with_values: give kappa or exchangeabilities, not both")
            kappa = values.pop("kappa")
            values["exchangeabilities"] = (1.0, kappa, 1.0, 1.0, kappa, 1.0)
        return dataclasses.replace(self, **values)


def parse_model(s: str) -> ModelSpec:
    """Parse an IQ-TREE model string (see module doc) into a :class:`ModelSpec`. Raises :class:`ModelError`
    naming the offending token and what was expected."""
    if not isinstance(s, str) or not s.strip():
        raise ModelError(f"empty model string {s!r}: expected e.g. 'GTR+F+G4'")
    tokens = _split_top_level(s.strip())
    name, args = _name_and_args(tokens[0], s)
    kind = _ALIASES.get(name.upper(), name.upper())
    if kind not in KINDS:
        raise ModelError(
            f"unknown model {tokens[0]!r} in {s!r}: expected one of JC, K80 (K2P), F81, HKY, GTR"
        )
    exchangeabilities = _kind_exchangeabilities(kind, args, tokens[0])
    freqs = "equal" if kind in _EQUAL_FREQ_KINDS else "empirical"
    invariant, pinv, gamma_categories, alpha = False, None, 0, None
    seen: set[str] = set()
    for token in tokens[1:]:
        name, args = _name_and_args(token, s)
        if name in ("F", "FQ", "FO"):
            slot, freqs = "frequency", _freq_component(name, args, token, kind)
        elif name == "I":
            slot, invariant = "invariant", True
            pinv = None if args is None else _one_number(args, token, "pinv")
        elif re.fullmatch(r"G\d*", name):
            slot, gamma_categories = "gamma", int(name[1:]) if len(name) > 1 else 4
            if gamma_categories < 1:
                raise ModelError(f"'+{token}': the number of gamma categories must be >= 1")
            alpha = None if args is None else _one_number(args, token, "alpha")
        else:
            raise ModelError(f"unknown component '+{token}' in {s!r}: expected one of {_EXPECTED_COMPONENTS}")
        if slot in seen:
            raise ModelError(
                f"duplicated {slot} component '+{token}' in {s!r}: each of +F, +I, +G may appear once"
            )
        seen.add(slot)
    return ModelSpec(kind, exchangeabilities, freqs, gamma_categories, alpha, invariant, pinv)


# --- parsing helpers -------------------------------------------------------------------------


def _split_top_level(s: str) -> list[str]:
    """Split on '+' outside braces (a '+' inside braces belongs to a number such as 1e+05)."""
    tokens, depth, start = [], 0, 0
    for i, ch in enumerate(s):
        if ch == "{":
            depth += 1
            if depth > 1:
                raise ModelError(f"nested '{{' at position {i} in {s!r}")
        elif ch == "}":
            depth -= 1
            if depth < 0:
                raise ModelError(f"unmatched '}}' at position {i} in {s!r}")
        elif ch == "+" and depth == 0:
            tokens.append(s[start:i])
            start = i + 1
    if depth:
        raise ModelError(f"unclosed '{{' in {s!r}")
    tokens.append(s[start:])
    for t in tokens:
        if not t.strip():
            raise ModelError(f"empty component (stray '+') in {s!r}")
    return [t.strip() for t in tokens]


def _name_and_args(token: str, s: str) -> tuple[str, list[float] | None]:
    m = re.fullmatch(r"([A-Za-z][A-Za-z0-9]*)(?:\{(.*)\})?", token)
    if m is None:
        raise ModelError(f"cannot read {token!r} in {s!r}: expected NAME or NAME{{numbers}}")
    name, body = m.groups()
    if body is None:
        return name, None
    if not body.strip():
        raise ModelError(f"empty braces in {token!r} in {s!r}: expected numbers or no braces at all")
    values = []
    for text in re.split(r"\s*,\s*|\s+", body.strip()):
        try:
            value = float(text)
        except ValueError:
            raise ModelError(f"{text!r} in {token!r} is not a number") from None
        if not math.isfinite(value):
            raise ModelError(f"{text!r} in {token!r} is not a finite number")
        values.append(value)
    return name, values


def _kind_exchangeabilities(kind: str, args: list[float] | None, token: str) -> tuple[float, ...] | None:
    if kind in ("JC", "F81"):
        if args is not None:
            raise ModelError(f"{token!r}: {kind} takes no numbers (its exchangeabilities are all 1)")
        return (1.0,) * 6
    if args is None:
        return None
    if kind in ("K80", "HKY"):
        kappa = _one_number(args, token, "kappa")
        return (1.0, kappa, 1.0, 1.0, kappa, 1.0)
    if len(args) not in (5, 6):
        raise ModelError(f"{token!r}: GTR takes 5 rates (AC,AG,AT,CG,CT; GT = 1) or 6, got {len(args)}")
    return tuple(args)


def _one_number(args: list[float], token: str, what: str) -> float:
    if len(args) != 1:
        raise ModelError(f"{token!r}: expected one number ({what}), got {len(args)}")
    return args[0]


def _freq_component(name: str, args: list[float] | None, token: str, kind: str):
    if kind in _EQUAL_FREQ_KINDS and not (name == "FQ" and args is None):
        raise ModelError(
            f"'+{token}': {kind} has equal base frequencies (only +FQ allowed); "
            f"use {'F81' if kind == 'JC' else 'HKY'} for other frequencies"
        )
    if args is None:
        return {"F": "empirical", "FQ": "equal", "FO": "estimate"}[name]
    if name != "F":
        raise ModelError(f"'+{token}': numbers go with +F{{pA,pC,pG,pT}}, +{name} takes none")
    if len(args) != 4:
        raise ModelError(f"'+{token}': expected 4 frequencies (pA,pC,pG,pT), got {len(args)}")
    return tuple(args)


# --- validation (shared by parse_model, ModelSpec construction and with_values) ---------------


def _checked_exchangeabilities(kind: str, rates) -> tuple[float, ...] | None:
    if rates is None:
        return (1.0,) * 6 if kind in ("JC", "F81") else None
    try:
        rates = tuple(float(r) for r in rates)
    except (TypeError, ValueError):
        raise ModelError(f"exchangeabilities must be numbers, got {rates!r}") from None
    if len(rates) == 5:
        rates = rates + (1.0,)
    if len(rates) != 6:
        raise ModelError(f"expected 5 or 6 exchangeabilities ({','.join(_PAIRS)}), got {len(rates)}")
    for pair, r in zip(_PAIRS, rates):
        if not (math.isfinite(r) and r > 0):
            raise ModelError(f"exchangeability {pair} must be a finite number > 0, got {r!r}")
    if rates[5] != 1.0:
        rates = tuple(r / rates[5] for r in rates[:5]) + (1.0,)
    if kind in ("JC", "F81") and rates != (1.0,) * 6:
        raise ModelError(f"{kind} has all exchangeabilities equal to 1, got {rates}")
    if kind in ("K80", "HKY"):
        transversions = (rates[0], rates[2], rates[3], rates[5])
        if transversions != (1.0,) * 4 or rates[1] != rates[4]:
            raise ModelError(f"{kind} exchangeabilities must be (1, kappa, 1, 1, kappa, 1), got {rates}")
    return rates


def _checked_freqs(kind: str, freqs):
    if isinstance(freqs, str):
        if freqs not in FREQ_MODES:
            raise ModelError(f"freqs must be one of {FREQ_MODES} or 4 numbers, got {freqs!r}")
        if kind in _EQUAL_FREQ_KINDS and freqs != "equal":
            raise ModelError(f"{kind} has equal base frequencies, got freqs={freqs!r}")
        return freqs
    try:
        values = tuple(float(p) for p in freqs)
    except (TypeError, ValueError):
        raise ModelError(f"freqs must be a mode string or 4 numbers, got {freqs!r}") from None
    if kind in _EQUAL_FREQ_KINDS:
        raise ModelError(f"{kind} has equal base frequencies, got fixed freqs {values}")
    if len(values) != 4:
        raise ModelError(f"expected 4 frequencies (pA,pC,pG,pT), got {len(values)}")
    for base, p in zip("ACGT", values):
        if not (math.isfinite(p) and 0 < p <= 1):
            raise ModelError(f"frequency of {base} must be in (0, 1], got {p!r}")
    total = math.fsum(values)
    if abs(total - 1) > FREQ_SUM_TOLERANCE:
        raise ModelError(f"frequencies {values} sum to {total!r}, not 1 (within {FREQ_SUM_TOLERANCE})")
    if abs(total - 1) > _NORMALISED_TOLERANCE:
        values = tuple(p / total for p in values)
    return values


def _as_float(value, what: str) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise ModelError(f"{what} must be a number, got {value!r}") from None
    if not math.isfinite(out):
        raise ModelError(f"{what} must be finite, got {value!r}")
    return out


def _braces(values) -> str:
    """``{x,y,..}``, each number as Python's shortest round-trip repr without a trailing ``.0``."""
    texts = [repr(float(x)) for x in values]
    return "{" + ",".join(text[:-2] if text.endswith(".0") else text for text in texts) + "}"
