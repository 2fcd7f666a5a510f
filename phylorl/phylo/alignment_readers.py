"""The parsers of the alignment formats: FASTA, PHYLIP (sequential and interleaved, strict and relaxed
names) and NEXUS (DATA/CHARACTERS blocks, interleave, matchchar, comments, quoted names).

Each returns ``(name, sequence text, line number)`` records (PHYLIP and NEXUS with the declared
``(ntax, nchar)``) for :func:`phylorl.phylo.alignment.parse_alignment`, which encodes and checks them.
Errors are :class:`AlignmentError` naming the source and the line or taxon.
"""

from __future__ import annotations

import re

STATE_MASKS: dict[str, int] = {  # upper-case symbol -> 4-bit state mask; lookups are case-insensitive
    "A": 1, "C": 2, "G": 4, "T": 8, "U": 8,
    "R": 5, "Y": 10, "S": 6, "W": 9, "K": 12, "M": 3, "B": 14, "D": 13, "H": 11, "V": 7,
    "N": 15, "X": 15, "?": 15, "-": 15, ".": 15, "~": 15,
}  # fmt: skip

MASK_SYMBOLS = "?ACMGRSVTWYHKDB-"  # mask -> symbol written by format_fasta / format_phylip (0 unused)


class AlignmentError(ValueError):
    """Malformed or unusable alignment input; the message names the file and the taxon or line."""


Record = tuple[str, str, int]  # one sequence as read: its name, its text, the line it starts on


def read_fasta(lines: list[tuple[int, str]], source: str) -> list[Record]:
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
    return (parts[0], parts[1]) if len(parts) == 2 else (line[:10], line[10:])


def read_phylip(lines: list[tuple[int, str]], source: str) -> tuple[list[Record], tuple[int, str]]:
    number, header = lines[0]
    match = re.fullmatch(r"(\d+)\s+(\d+)\s*(.*)", header)
    if not match or int(match[1]) == 0 or int(match[2]) == 0:
        raise AlignmentError(f"{source}: line {number}: PHYLIP header must be 'ntax nchar' (both > 0)")
    ntax, nchar = int(match[1]), int(match[2])
    expected = (nchar, "from the PHYLIP header")
    body = lines[1:]
    if len(body) < ntax:
        raise AlignmentError(
            f"{source}: the PHYLIP header says {ntax} taxa but only {len(body)} sequence lines follow"
        )
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
    first = [(*_split_phylip_name(line), number) for number, line in body[:ntax]]
    chunks = [[_no_space(rest)] for _, rest, _ in first]
    for i, (_, line) in enumerate(body[ntax:]):
        chunks[i % ntax].append(_no_space(line))
    return [(name, "".join(parts), number) for (name, _, number), parts in zip(first, chunks)]


def _gather_sequential(
    body: list[tuple[int, str]], split_name, clean, nchar: int, ntax: int | None, source: str
) -> list[Record]:
    """Each taxon: a line starting with its name, then continuation lines until it has ``nchar`` sites.
    ``split_name(line) -> (name, rest)``; ``clean(text) -> sequence`` (whitespace removed). A line that would
    overflow the current taxon and holds several words starts the next taxon, so a short sequence is reported
    as short rather than swallowing its neighbour's line."""
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
            raise AlignmentError(
                f"{source}: line {number}: more data than the declared {ntax} taxa x {nchar} sites"
            )
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
        return MASK_SYMBOLS[mask] if 0 < mask < 16 else match[0]  # unknown member: left for the error

    def clean(text: str) -> str:
        text = _STATE_SET.sub(state_set, _no_space(text))
        return "".join(mapping.get(ch, ch) for ch in text) if mapping.keys() - {"?", "-"} else text

    return clean


def read_nexus(text: str, source: str) -> tuple[list[Record], tuple[int, str]]:
    start = len(text) - len(text.lstrip())
    if text[start : start + 6].upper() != "#NEXUS":
        raise AlignmentError(f"{source}: a NEXUS file must start with '#NEXUS'")
    text = _strip_nexus_comments(text[:start] + " " * 6 + text[start + 6 :], source)
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
            raise AlignmentError(
                f"{source}: line {number}: duplicate taxon name {name!r} in one MATRIX block"
            )
        chunks[name].append(clean(rest))
    if ntax is not None and len(chunks) != ntax:
        raise AlignmentError(f"{source}: NTAX={ntax} but the MATRIX has {len(chunks)} taxa")
    return [(name, "".join(parts), numbers[name]) for name, parts in chunks.items()]


def _apply_matchchar(records: list[Record], matchchar: str, source: str) -> list[Record]:
    """Replace MATCHCHAR by the first taxon's symbol at the same site."""
    name0, reference, number0 = records[0]
    if matchchar in reference:
        raise AlignmentError(
            f"{source}: line {number0}: the first taxon {name0!r} uses MATCHCHAR {matchchar!r}"
        )

    def matched(seq: str) -> str:
        return (
            "".join(ref if ch == matchchar else ch for ch, ref in zip(seq, reference)) + seq[len(reference) :]
        )

    return [records[0]] + [(name, matched(seq), number) for name, seq, number in records[1:]]
