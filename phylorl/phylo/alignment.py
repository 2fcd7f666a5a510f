"""DNA alignments: the data model, reading (FASTA, PHYLIP, NEXUS; the parsers of each format are in
:mod:`phylorl.phylo.alignment_readers`), writing, site patterns, empirical base frequencies.

Every character is held as a 4-bit state mask (A=1, C=2, G=4, T=8): an IUPAC ambiguity code is the
union of its bases, and gaps / missing data (``- ? N X . ~``) are 15, "any base", exactly as IQ-TREE 2
treats them in a likelihood. Taxon names are kept exactly as written (underscores preserved).

Bad input raises :class:`AlignmentError` whose message starts with the file (or ``source``) and names
the offending taxon or line.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path

import numpy as np

from .alignment_readers import MASK_SYMBOLS, STATE_MASKS, AlignmentError, read_fasta, read_nexus, read_phylip

MIN_TAXA = 4
_LUT = np.zeros(256, dtype=np.uint8)
for _symbol, _mask in STATE_MASKS.items():
    _LUT[ord(_symbol)] = _LUT[ord(_symbol.lower())] = _mask
# IQ-TREE's state order for the frequency EM: A, C, G, T, ambiguity codes by mask, then unknown.
_EM_ORDER = (1, 2, 4, 8, 3, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15)
_EM_ROUNDS = 8
_FORMATS = ("fasta", "phylip", "nexus")
_EXTENSIONS = {
    ".fa": "fasta", ".fasta": "fasta", ".fas": "fasta", ".fna": "fasta",
    ".phy": "phylip", ".phylip": "phylip", ".nex": "nexus", ".nexus": "nexus", ".nxs": "nexus",
}  # fmt: skip


@dataclass(frozen=True, eq=False)
class SitePatterns:
    """Distinct alignment columns, in order of first occurrence."""

    codes: np.ndarray  # uint8 [n_taxa, n_patterns] state masks, C-contiguous, read-only
    weights: np.ndarray  # float64 [n_patterns]: the number of sites showing each pattern (sums to n_sites)
    site_pattern: np.ndarray  # int64 [n_sites]: each site's pattern (codes[:, site_pattern] is the alignment)

    @property
    def n_patterns(self) -> int:
        return int(self.weights.shape[0])


@dataclass(frozen=True, eq=False, repr=False)
class Alignment:
    """An aligned set of DNA sequences as state masks; two are equal when their taxa and codes are."""

    taxa: tuple[str, ...]  # unique names in file order (tree leaves 0..n-1 follow this order)
    codes: np.ndarray  # uint8 [n_taxa, n_sites] state masks in 1..15, stored as a read-only C-contiguous copy
    source: str | None = None  # where it came from (a file path or "<string>"); not part of identity
    _cache: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        taxa, raw, where = tuple(self.taxa), np.asarray(self.codes), self.source or "<alignment>"
        if not all(isinstance(name, str) and name for name in taxa):
            raise AlignmentError(f"{where}: taxon names must be non-empty strings")
        if len(set(taxa)) != len(taxa):
            duplicate = next(name for i, name in enumerate(taxa) if name in taxa[:i])
            raise AlignmentError(f"{where}: duplicate taxon name {duplicate!r}")
        if raw.ndim != 2 or raw.shape[0] != len(taxa) or raw.shape[1] == 0:
            raise AlignmentError(f"{where}: codes must be [n_taxa={len(taxa)}, n_sites>0], got {raw.shape}")
        if raw.dtype.kind not in "ui" or raw.min() < 1 or raw.max() > 15:
            raise AlignmentError(f"{where}: codes must be integer state masks in 1..15")
        codes = np.array(raw, dtype=np.uint8, order="C", copy=True)
        codes.flags.writeable = False
        object.__setattr__(self, "taxa", taxa)
        object.__setattr__(self, "codes", codes)

    @property
    def n_taxa(self) -> int:
        return int(self.codes.shape[0])

    @property
    def n_sites(self) -> int:
        return int(self.codes.shape[1])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Alignment):
            return NotImplemented
        return self.taxa == other.taxa and np.array_equal(self.codes, other.codes)

    def __hash__(self) -> int:
        return hash(self.content_hash())

    def __repr__(self) -> str:
        return f"Alignment(n_taxa={self.n_taxa}, n_sites={self.n_sites}, source={self.source!r})"

    def patterns(self) -> SitePatterns:
        """Compressed site patterns (cached); see :class:`SitePatterns`."""
        if "patterns" not in self._cache:
            self._cache["patterns"] = _compress(self.codes)
        return self._cache["patterns"]

    def empirical_frequencies(self) -> np.ndarray:
        """Base frequencies (A, C, G, T), float64 ``[4]``, exactly as IQ-TREE 2.0.7 computes them for ``+F``.
        IQ-TREE's ``Alignment::computeStateFreq``: start from 1/4 each and run 8 EM rounds over all
        characters; each character spreads one count over the bases its mask allows, in proportion to the
        current frequencies. Gaps and unknowns (mask 15) take part too (spread by the current frequencies),
        which damps the iteration, so after 8 rounds they still shift the result a little. No flooring is
        applied: an absent base gets frequency 0 (IQ-TREE then drops that state from its Markov process).
        Returns a fresh array each call."""
        if "freqs" not in self._cache:
            counts = np.bincount(self.codes.ravel(), minlength=16)
            freq = [0.25, 0.25, 0.25, 0.25]
            for _ in range(_EM_ROUNDS):  # plain floats, IQ-TREE's operation order
                new = [0.0, 0.0, 0.0, 0.0]
                for mask in _EM_ORDER:
                    count = int(counts[mask])
                    if count == 0:
                        continue
                    part = [freq[j] if mask >> j & 1 else 0.0 for j in range(4)]
                    inv_total = 1.0 / (part[0] + part[1] + part[2] + part[3])
                    for j in range(4):
                        new[j] += part[j] * inv_total * count
                inv_total = 1.0 / (new[0] + new[1] + new[2] + new[3])
                freq = [x * inv_total for x in new]
            self._cache["freqs"] = np.array(freq, dtype=np.float64)
        return self._cache["freqs"].copy()

    def content_hash(self) -> str:
        """SHA-256 hex digest over taxon names (in order) and codes; stable across runs and machines."""
        if "hash" not in self._cache:
            digest = hashlib.sha256(b"phylorl.alignment.v1\0")
            digest.update(f"{self.n_taxa} {self.n_sites}\0".encode())
            for name in self.taxa:
                raw = name.encode("utf-8")
                digest.update(len(raw).to_bytes(4, "little") + raw)
            digest.update(self.codes.tobytes(order="C"))
            self._cache["hash"] = digest.hexdigest()
        return self._cache["hash"]


def _compress(codes: np.ndarray) -> SitePatterns:
    n_taxa, n_sites = codes.shape
    columns = np.ascontiguousarray(codes.T).view(np.dtype((np.void, n_taxa))).ravel()
    _, first, inverse = np.unique(columns, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # patterns by first occurrence
    rank = np.empty_like(order)
    rank[order] = np.arange(order.shape[0])
    site_pattern = rank[inverse.ravel()].astype(np.int64)
    pattern_codes = np.ascontiguousarray(codes[:, first[order]])
    weights = np.bincount(site_pattern, minlength=order.shape[0]).astype(np.float64)
    for array in (pattern_codes, weights, site_pattern):
        array.flags.writeable = False
    return SitePatterns(codes=pattern_codes, weights=weights, site_pattern=site_pattern)


# ---------------------------------------------------------------------------------------------- reading


def load_alignment(path: str | PathLike, fmt: str | None = None, *, min_taxa: int = MIN_TAXA) -> Alignment:
    """Read an alignment file. The format is ``fmt`` if given, else from the extension
    (.fa/.fasta/.fas/.fna, .phy/.phylip, .nex/.nexus/.nxs), else detected from the content."""
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        raise AlignmentError(f"{source}: cannot read file: {err.strerror or err}") from err
    if b"\0" in data:
        raise AlignmentError(f"{source}: binary file (contains NUL bytes), not an alignment")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise AlignmentError(f"{source}: not a text file (invalid UTF-8 at byte {err.start})") from err
    fmt = fmt or _EXTENSIONS.get(Path(path).suffix.lower())
    return parse_alignment(text, fmt, source=source, min_taxa=min_taxa)


def parse_alignment(
    text: str, fmt: str | None = None, source: str = "<string>", *, min_taxa: int = MIN_TAXA
) -> Alignment:
    """Parse alignment text in ``fmt`` ("fasta", "phylip", "nexus"; None = detect from the content).
    ``min_taxa`` (default 4, the smallest tree with an SPR move) may be lowered for tiny test cases."""
    if "\0" in text:
        raise AlignmentError(f"{source}: binary data (contains NUL characters), not an alignment")
    lines = [(number, line.strip()) for number, line in enumerate(text.splitlines(), 1)]
    lines = [(number, line) for number, line in lines if line]
    if not lines:
        raise AlignmentError(f"{source}: empty file")
    fmt = fmt.lower() if fmt else _detect_format(lines, source)
    if fmt not in _FORMATS:
        raise AlignmentError(f"{source}: unknown alignment format {fmt!r}; expected one of {_FORMATS}")
    if fmt == "fasta":
        records, expected = read_fasta(lines, source), None
    elif fmt == "phylip":
        records, expected = read_phylip(lines, source)
    else:
        records, expected = read_nexus(text, source)
    return _build(records, expected, source, min_taxa)


def _detect_format(lines: list[tuple[int, str]], source: str) -> str:
    number, first = lines[0]
    if first.startswith(">"):
        return "fasta"
    if first.upper().startswith("#NEXUS"):
        return "nexus"
    if re.match(r"\d+\s+\d+(\s|$)", first):
        return "phylip"
    raise AlignmentError(
        f"{source}: line {number}: cannot detect the format "
        "(expected FASTA '>name', a PHYLIP 'ntax nchar' header or '#NEXUS')"
    )


def _build(records: list, expected: tuple[int, str] | None, source: str, min_taxa: int) -> Alignment:
    """Check the (name, text, line) records' names and lengths, encode; ``expected``: (n_sites, origin)."""
    if not records:
        raise AlignmentError(f"{source}: no sequences found")
    first_line: dict[str, int] = {}
    for name, _, number in records:
        if name in first_line:
            raise AlignmentError(
                f"{source}: line {number}: duplicate taxon name {name!r} (first at line {first_line[name]})"
            )
        first_line[name] = number
    if expected is None:
        expected = (len(records[0][1]), f"the length of taxon {records[0][0]!r}")
    n_sites, origin = expected
    for name, seq, number in records:
        if len(seq) != n_sites:
            raise AlignmentError(
                f"{source}: line {number}: taxon {name!r} has {len(seq)} sites, expected {n_sites} ({origin})"
            )
    if n_sites == 0:
        raise AlignmentError(f"{source}: the sequences are empty (0 sites)")
    codes = np.stack([_encode(name, seq, number, source) for name, seq, number in records])
    if len(records) < min_taxa:
        raise AlignmentError(
            f"{source}: only {len(records)} taxa ({', '.join(first_line)}); at least {min_taxa} are needed"
        )
    return Alignment(taxa=tuple(first_line), codes=codes, source=source)


def _encode(name: str, seq: str, number: int, source: str) -> np.ndarray:
    try:
        codes = _LUT[np.frombuffer(seq.encode("ascii"), dtype=np.uint8)]
        bad = np.flatnonzero(codes == 0)[:1].tolist()
    except UnicodeEncodeError as err:
        bad = [err.start]
    if bad:
        raise AlignmentError(
            f"{source}: line {number}: taxon {name!r}: unknown character {seq[bad[0]]!r} at site {bad[0] + 1}"
        )
    return codes


def _sequence_text(alignment: Alignment, what: str) -> list[str]:
    """Each taxon's sequence as text, after checking that every name can be written to ``what``."""
    for name in alignment.taxa:
        if not name or any(ch.isspace() for ch in name):
            raise AlignmentError(
                f"{alignment.source}: taxon {name!r} cannot be written to {what}: name has whitespace"
            )
    lut = np.frombuffer(MASK_SYMBOLS.encode(), dtype=np.uint8)
    return [row.tobytes().decode("ascii") for row in lut[alignment.codes]]


def format_fasta(alignment: Alignment, width: int = 0) -> str:
    """FASTA text; ``width`` > 0 wraps sequences at that many characters. Mask 15 is written '-'."""
    parts = []
    for name, seq in zip(alignment.taxa, _sequence_text(alignment, "FASTA")):
        lines = [seq[i : i + width] for i in range(0, len(seq), width)] if width > 0 else [seq]
        parts.append(f">{name}\n" + "\n".join(lines) + "\n")
    return "".join(parts)


def format_phylip(alignment: Alignment) -> str:
    """Relaxed sequential PHYLIP: 'ntax nchar' header, then one 'name  sequence' line per taxon."""
    text = _sequence_text(alignment, "PHYLIP")
    pad = max(len(name) for name in alignment.taxa) + 2
    lines = [f"{alignment.n_taxa} {alignment.n_sites}"]
    lines += [name.ljust(pad) + seq for name, seq in zip(alignment.taxa, text)]
    return "\n".join(lines) + "\n"
