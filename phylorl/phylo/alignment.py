"""DNA alignments: reading (FASTA, PHYLIP, NEXUS), site patterns, empirical base frequencies.

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

STATE_MASKS: dict[str, int] = {
    "A": 1, "C": 2, "G": 4, "T": 8, "U": 8,
    "R": 5, "Y": 10, "S": 6, "W": 9, "K": 12, "M": 3, "B": 14, "D": 13, "H": 11, "V": 7,
    "N": 15, "X": 15, "?": 15, "-": 15, ".": 15, "~": 15,
}  # fmt: skip
"""Upper-case symbol -> 4-bit state mask; lookups in this module are case-insensitive."""

MIN_TAXA = 4
_MASK_CHARS = "?ACMGRSVTWYHKDB-"  # mask -> symbol written by format_fasta / format_phylip (0 unused)
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


class AlignmentError(ValueError):
    """Malformed or unusable alignment input; the message names the file and the taxon or line."""


@dataclass(frozen=True, eq=False)
class SitePatterns:
    """Distinct alignment columns, in order of first occurrence.

    Attributes:
        codes: uint8 ``[n_taxa, n_patterns]`` state masks, C-contiguous, read-only.
        weights: float64 ``[n_patterns]``: number of sites showing each pattern (sums to n_sites).
        site_pattern: int64 ``[n_sites]``: pattern index of each site, so
            ``codes[:, site_pattern]`` reproduces the alignment.
    """

    codes: np.ndarray
    weights: np.ndarray
    site_pattern: np.ndarray

    @property
    def n_patterns(self) -> int:
        return int(self.weights.shape[0])


@dataclass(frozen=True, eq=False, repr=False)
class Alignment:
    """An aligned set of DNA sequences as state masks.

    Attributes:
        taxa: taxon names, unique, in file order (tree leaves 0..n-1 follow this order).
        codes: uint8 ``[n_taxa, n_sites]`` state masks in 1..15; stored as a read-only C-contiguous copy.
        source: where the alignment came from (file path or ``"<string>"``); not part of identity.

    Two alignments are equal when taxa and codes are equal; ``source`` is ignored.
    """

    taxa: tuple[str, ...]
    codes: np.ndarray
    source: str | None = None
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
        characters; each character spreads one count over the bases its mask allows, in proportion to
        the current frequencies. Gaps and unknowns (mask 15) take part too (spread by the current
        frequencies), which damps the iteration, so after 8 rounds they still shift the result a little.
        No flooring is applied: an absent base gets frequency 0 (IQ-TREE then drops that state from
        its Markov process). Returns a fresh array each call.
        """
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

    ``min_taxa`` (default 4, the smallest tree with an SPR move) may be lowered for tiny test cases.
    """
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
        records, expected = _read_fasta(lines, source), None
    elif fmt == "phylip":
        records, expected = _read_phylip(lines, source)
    else:
        records, expected = _read_nexus(text, source)
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


# A record is (taxon name, sequence text, line number of the name).
Record = tuple[str, str, int]


def _build(records: list[Record], expected: tuple[int, str] | None, source: str, min_taxa: int) -> Alignment:
    """Check names and lengths, encode; ``expected`` = (n_sites, where that number comes from)."""
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


def _read_fasta(lines: list[tuple[int, str]], source: str) -> list[Record]:
    records: list[tuple[str, list[str], int]] = []
    for number, line in lines:
        if line.startswith(">"):
            tokens = line[1:].split(maxsplit=1)
            if not tokens:
                raise AlignmentError(f"{source}: line {number}: sequence header '>' has no name")
            records.append((tokens[0], [], number))
        elif not records:
            raise AlignmentError(f"{source}: line {number}: sequence data before the first '>' header")
        else:
            records[-1][1].append(_no_space(line))
    return [(name, "".join(chunks), number) for name, chunks, number in records]


def _no_space(text: str) -> str:
    return "".join(text.split())


def _split_phylip_name(line: str) -> tuple[str, str]:
    """Relaxed PHYLIP: name, whitespace, sequence; a line without whitespace has a strict 10-char name."""
    parts = line.split(maxsplit=1)
    if len(parts) == 2:
        return parts[0], parts[1]
    return line[:10], line[10:]


def _read_phylip(lines: list[tuple[int, str]], source: str) -> tuple[list[Record], tuple[int, str]]:
    number, header = lines[0]
    match = re.fullmatch(r"(\d+)\s+(\d+)\s*(.*)", header)
    if not match or int(match[1]) == 0 or int(match[2]) == 0:
        raise AlignmentError(f"{source}: line {number}: PHYLIP header must be 'ntax nchar' (both > 0)")
    ntax, nchar = int(match[1]), int(match[2])
    expected = (nchar, "from the PHYLIP header")
    body = lines[1:]
    if len(body) < ntax:
        raise AlignmentError(f"{source}: the PHYLIP header says {ntax} taxa but only {len(body)} sequence lines follow")
    options = match[3].upper().split()
    if "S" in options or len(body) == ntax:
        return _gather_sequential(body, _split_phylip_name, _no_space, nchar, ntax, source), expected
    interleaved = _phylip_interleaved(body, ntax)
    if "I" in options or all(len(seq) == nchar for _, seq, _ in interleaved):
        return interleaved, expected
    try:
        return _gather_sequential(body, _split_phylip_name, _no_space, nchar, ntax, source), expected
    except AlignmentError:
        if len(body) % ntax:
            raise
        return interleaved, expected  # _build reports the first taxon of the wrong length


def _phylip_interleaved(body: list[tuple[int, str]], ntax: int) -> list[Record]:
    """Names in the first block only; later lines go round-robin to the taxa."""
    names, chunks, numbers = [], [], []
    for number, line in body[:ntax]:
        name, rest = _split_phylip_name(line)
        names.append(name)
        chunks.append([_no_space(rest)])
        numbers.append(number)
    for i, (_, line) in enumerate(body[ntax:]):
        chunks[i % ntax].append(_no_space(line))
    return [(name, "".join(parts), number) for name, parts, number in zip(names, chunks, numbers)]


def _gather_sequential(
    body: list[tuple[int, str]], split_name, clean, nchar: int, ntax: int | None, source: str
) -> list[Record]:
    """Each taxon: a line starting with its name, then continuation lines until it has ``nchar`` sites.

    ``split_name(line) -> (name, rest)``; ``clean(text) -> sequence`` (whitespace removed). A line that
    would overflow the current taxon and holds several words starts the next taxon, so a short
    sequence is reported as short rather than swallowing its neighbour's line.
    """
    records: list[tuple[str, list[str], int]] = []
    length = nchar
    for number, line in body:
        if length < nchar:
            chunk = clean(line)
            if length + len(chunk) <= nchar or len(line.split()) == 1:
                records[-1][1].append(chunk)
                length += len(chunk)
                continue
        if ntax is not None and len(records) == ntax:
            raise AlignmentError(f"{source}: line {number}: more data than the declared {ntax} taxa x {nchar} sites")
        name, rest = split_name(line)
        rest = clean(rest)
        records.append((name, [rest], number))
        length = len(rest)
    if ntax is not None and len(records) != ntax:
        raise AlignmentError(f"{source}: {ntax} taxa declared but {len(records)} found")
    return [(name, "".join(chunks), number) for name, chunks, number in records]


# ---------------------------------------------------------------------------------------------- NEXUS

_QUOTED = re.compile(r"'((?:[^']|'')*)'")
_STATE_SET = re.compile(r"[{(]([^})]*)[})]")


def _strip_nexus_comments(text: str, source: str) -> str:
    """Blank out [comments] (nested) outside quotes, keeping newlines so line numbers stay true."""
    out, depth, quoted, kept = [], 0, False, 0
    for match in re.finditer(r"[\[\]']", text):
        ch, i = match[0], match.start()
        if depth:
            depth += 1 if ch == "[" else -1 if ch == "]" else 0
            if depth == 0:
                out.append(re.sub(r"[^\n]", " ", text[kept : i + 1]))
                kept = i + 1
        elif ch == "'":
            quoted = not quoted
        elif ch == "[" and not quoted:
            out.append(text[kept:i])
            depth, kept = 1, i
    if depth:
        raise AlignmentError(f"{source}: line {text.count(chr(10), 0, kept) + 1}: unterminated [comment]")
    return "".join(out) + text[kept:]


def _nexus_commands(text: str):
    """Yield (line number, command text) for each ';'-terminated command, ignoring ';' inside quotes."""
    start = 0
    for match in re.finditer(r"'(?:[^']|'')*'|;", text):
        if match[0] == ";":
            yield text.count("\n", 0, start) + 1, text[start : match.start()]
            start = match.end()


def _split_nexus_name(line: str) -> tuple[str, str]:
    """A taxon name (quoted with '' escapes, or one word) and the rest of the line."""
    match = _QUOTED.match(line)
    if match:
        return match[1].replace("''", "'"), line[match.end() :]
    parts = line.split(maxsplit=1)
    return parts[0], parts[1] if len(parts) == 2 else ""


def _nexus_cleaner(fmt: dict[str, str], source: str):
    """Sequence text -> plain symbols: whitespace dropped, {AG}/(AG) state sets -> IUPAC letter,
    the declared MISSING and GAP symbols -> '?' and '-'."""
    mapping = {}
    for key, standard in (("MISSING", "?"), ("GAP", "-")):
        symbol = fmt.get(key, standard)
        if len(symbol) != 1:
            raise AlignmentError(f"{source}: FORMAT {key}={symbol!r} must be one character")
        mapping[symbol.upper()] = mapping[symbol.lower()] = standard

    def state_set(match: re.Match) -> str:
        mask = 0
        for symbol in _no_space(match[1]):
            mask |= STATE_MASKS.get(mapping.get(symbol, symbol).upper(), 0) or 16
        return _MASK_CHARS[mask] if 0 < mask < 16 else match[0]  # unknown member: left for the error

    def clean(text: str) -> str:
        text = _STATE_SET.sub(state_set, _no_space(text))
        return "".join(mapping.get(ch, ch) for ch in text) if mapping.keys() - {"?", "-"} else text

    return clean


def _read_nexus(text: str, source: str) -> tuple[list[Record], tuple[int, str]]:
    start = len(text) - len(text.lstrip())
    if text[start : start + 6].upper() != "#NEXUS":
        raise AlignmentError(f"{source}: a NEXUS file must start with '#NEXUS'")
    text = _strip_nexus_comments(text[: start] + " " * 6 + text[start + 6 :], source)
    block, ntax, nchar, fmt, matrix = None, None, None, {}, None
    for number, command in _nexus_commands(text):
        words = command.split()
        head = words[0].upper() if words else ""
        if head == "BEGIN":
            block = words[1].upper() if len(words) > 1 else None
        elif head in ("END", "ENDBLOCK"):
            block = None
        elif block in ("DATA", "CHARACTERS", "TAXA") and head == "DIMENSIONS":
            dims = {key.upper(): int(value) for key, value in re.findall(r"(\w+)\s*=\s*(\d+)", command)}
            ntax = dims.get("NTAX", ntax)
            nchar = dims.get("NCHAR", nchar) if block != "TAXA" else nchar
        elif block in ("DATA", "CHARACTERS") and head == "FORMAT":
            body = command[command.upper().index("FORMAT") + 6 :]
            for key, value in re.findall(r"(\w+)(?:\s*=\s*(\"[^\"]*\"|'[^']*'|[^\s=]+))?", body):
                fmt[key.upper()] = value.strip("\"'") if value else "YES"
        elif block in ("DATA", "CHARACTERS") and head == "MATRIX" and matrix is None:
            offset = command.upper().index("MATRIX") + len("MATRIX")
            first = number + command.count("\n", 0, offset)
            matrix = [(first + i, line.strip()) for i, line in enumerate(command[offset:].split("\n"))]
            matrix = [(n, line) for n, line in matrix if line]
    if matrix is None:
        raise AlignmentError(f"{source}: no MATRIX in a DATA or CHARACTERS block")
    if nchar is None:
        raise AlignmentError(f"{source}: DIMENSIONS NCHAR=... is missing")
    datatype = fmt.get("DATATYPE", "DNA").upper()
    if datatype not in ("DNA", "RNA", "NUCLEOTIDE"):
        raise AlignmentError(f"{source}: DATATYPE={datatype} is not supported (DNA/RNA only)")
    clean = _nexus_cleaner(fmt, source)
    if fmt.get("INTERLEAVE", "NO").upper() in ("YES", "TRUE"):
        records = _nexus_interleaved(matrix, ntax, clean, source)
    else:
        records = _gather_sequential(matrix, _split_nexus_name, clean, nchar, ntax, source)
    matchchar = fmt.get("MATCHCHAR")
    if matchchar:
        records = _apply_matchchar(records, matchchar, source)
    return records, (nchar, "NCHAR")


def _nexus_interleaved(matrix, ntax: int | None, clean, source: str) -> list[Record]:
    """Every line is 'name chunk'; blocks of ntax lines (or until a name repeats) repeat the taxa."""
    chunks: dict[str, list[str]] = {}
    numbers: dict[str, int] = {}
    block_size = ntax
    for i, (number, line) in enumerate(matrix):
        name, rest = _split_nexus_name(line)
        if block_size is None and name in chunks:
            block_size = len(chunks)
        block = i // block_size if block_size else 0
        if name not in chunks and block == 0:
            chunks[name], numbers[name] = [], number
        elif name not in chunks:
            raise AlignmentError(f"{source}: line {number}: taxon {name!r} is not in the first MATRIX block")
        elif len(chunks[name]) != block:
            raise AlignmentError(f"{source}: line {number}: duplicate taxon name {name!r} in one MATRIX block")
        chunks[name].append(clean(rest))
    if ntax is not None and len(chunks) != ntax:
        raise AlignmentError(f"{source}: NTAX={ntax} but the MATRIX has {len(chunks)} taxa")
    return [(name, "".join(parts), numbers[name]) for name, parts in chunks.items()]


def _apply_matchchar(records: list[Record], matchchar: str, source: str) -> list[Record]:
    """Replace MATCHCHAR by the first taxon's symbol at the same site."""
    name0, reference, number0 = records[0]
    if matchchar in reference:
        raise AlignmentError(f"{source}: line {number0}: the first taxon {name0!r} uses MATCHCHAR {matchchar!r}")
    out = [records[0]]
    for name, seq, number in records[1:]:
        if matchchar in seq:
            seq = "".join(ref if ch == matchchar else ch for ch, ref in zip(seq, reference)) + seq[len(reference) :]
        out.append((name, seq, number))
    return out


# ---------------------------------------------------------------------------------------------- writing


def _sequence_text(alignment: Alignment) -> list[str]:
    lut = np.frombuffer(_MASK_CHARS.encode(), dtype=np.uint8)
    rows = lut[alignment.codes]
    return [row.tobytes().decode("ascii") for row in rows]


def _check_writable(alignment: Alignment, what: str) -> None:
    for name in alignment.taxa:
        if not name or any(ch.isspace() for ch in name):
            raise AlignmentError(f"{alignment.source}: taxon {name!r} cannot be written to {what}: name has whitespace")


def format_fasta(alignment: Alignment, width: int = 0) -> str:
    """FASTA text; ``width`` > 0 wraps sequences at that many characters. Mask 15 is written '-'."""
    _check_writable(alignment, "FASTA")
    parts = []
    for name, seq in zip(alignment.taxa, _sequence_text(alignment)):
        lines = [seq[i : i + width] for i in range(0, len(seq), width)] if width > 0 else [seq]
        parts.append(f">{name}\n" + "\n".join(lines) + "\n")
    return "".join(parts)


def format_phylip(alignment: Alignment) -> str:
    """Relaxed sequential PHYLIP: 'ntax nchar' header, then one 'name  sequence' line per taxon."""
    _check_writable(alignment, "PHYLIP")
    pad = max(len(name) for name in alignment.taxa) + 2
    lines = [f"{alignment.n_taxa} {alignment.n_sites}"]
    lines += [name.ljust(pad) + seq for name, seq in zip(alignment.taxa, _sequence_text(alignment))]
    return "\n".join(lines) + "\n"
